package fence

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// covers: G6
func TestResolveBookmark(t *testing.T) {
	create := HistoryTransition{Epoch: 1, Start: 0, Kind: TransitionCreate}
	purgeAt := func(e HistoryEpoch, start uint64) HistoryTransition {
		return HistoryTransition{Epoch: e, Start: start, Kind: TransitionPurge}
	}
	lossy := func(e HistoryEpoch, kept, start uint64) HistoryTransition {
		return HistoryTransition{Epoch: e, Start: start, Kind: TransitionLossyRecovery, KeptEnd: kept}
	}
	at := func(h HistoryEpoch, start, hw uint64) Partition {
		return Partition{Topic: topicA, History: h, LogStart: start, HighWatermark: hw}
	}
	cases := []struct {
		name    string
		p       Partition
		lineage []HistoryTransition
		offset  uint64
		epoch   HistoryEpoch
		want    Resolution
		err     error
	}{
		{"current epoch stands", at(1, 0, 10), []HistoryTransition{create}, 4, 1, Resolution{Outcome: ResumeAt, Offset: 4}, nil},
		{"purge: the new start, not no-offset", at(2, 3, 8), []HistoryTransition{create, purgeAt(2, 3)}, 2, 1, Resolution{Outcome: ResumeAt, Offset: 3, Moved: true}, nil},
		{"purge: bookmark at the old end", at(2, 3, 8), []HistoryTransition{create, purgeAt(2, 3)}, 3, 1, Resolution{Outcome: ResumeAt, Offset: 3, Moved: true}, nil},
		{"purge: fewer new messages than the old offset", at(2, 3, 4), []HistoryTransition{create, purgeAt(2, 3)}, 2, 1, Resolution{Outcome: ResumeAt, Offset: 3, Moved: true}, nil},
		{"lossy: bookmark kept", at(2, 0, 120), []HistoryTransition{create, lossy(2, 10, 100)}, 7, 1, Resolution{Outcome: ResumeAt, Offset: 7}, nil},
		{"lossy: bookmark at the kept end", at(2, 0, 120), []HistoryTransition{create, lossy(2, 10, 100)}, 10, 1, Resolution{Outcome: ResumeAt, Offset: 10}, nil},
		{"lossy: bookmark in the lost part", at(2, 0, 120), []HistoryTransition{create, lossy(2, 10, 100)}, 12, 1, Resolution{Outcome: ResumeAt, Offset: 100, Moved: true}, nil},
		{"chain: kept by a recovery, moved by a purge", at(3, 150, 160), []HistoryTransition{create, lossy(2, 10, 100), purgeAt(3, 150)}, 5, 1, Resolution{Outcome: ResumeAt, Offset: 150, Moved: true}, nil},
		{"chain: from the middle epoch", at(3, 150, 160), []HistoryTransition{create, lossy(2, 10, 100), purgeAt(3, 150)}, 120, 2, Resolution{Outcome: ResumeAt, Offset: 150, Moved: true}, nil},
		{"chain: purge then recovery losing the new start", at(3, 0, 300), []HistoryTransition{create, purgeAt(2, 50), lossy(3, 40, 200)}, 10, 1, Resolution{Outcome: ResumeAt, Offset: 200, Moved: true}, nil},
		{"chain: purge then recovery keeping it", at(3, 50, 300), []HistoryTransition{create, purgeAt(2, 50), lossy(3, 60, 200)}, 10, 1, Resolution{Outcome: ResumeAt, Offset: 50, Moved: true}, nil},
		{"purge then retention: the log start", at(2, 6, 9), []HistoryTransition{create, purgeAt(2, 3)}, 1, 1, Resolution{Outcome: ResumeAt, Offset: 6, Moved: true, Truncated: true}, nil},
		{"retention only: the reset policy", at(1, 6, 9), []HistoryTransition{create}, 4, 1, Resolution{Outcome: ResumeByPolicy, Offset: 4}, nil},
		{"kept by a recovery, then retention: the reset policy", at(2, 8, 120), []HistoryTransition{create, lossy(2, 10, 100)}, 7, 1, Resolution{Outcome: ResumeByPolicy, Offset: 7}, nil},
		{"past the high watermark", at(1, 0, 9), []HistoryTransition{create}, 10, 1, Resolution{Outcome: ResumeByPolicy, Offset: 10}, nil},
		{"epoch not in the lineage", at(3, 0, 9), []HistoryTransition{purgeAt(2, 0), purgeAt(3, 0)}, 1, 1, Resolution{}, ErrUnknownHistory},
		{"epoch ahead of the partition", at(1, 0, 9), []HistoryTransition{create}, 1, 2, Resolution{}, ErrUnknownHistory},
		{"lineage not ending at the current epoch", at(2, 0, 9), []HistoryTransition{create}, 1, 1, Resolution{}, ErrUnknownHistory},
		{"empty lineage", at(1, 0, 9), nil, 1, 1, Resolution{}, ErrUnknownHistory},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResolveBookmark(c.p, c.lineage, c.offset, c.epoch)
			if c.err != nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("got %v, want %v", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

// modelRecord is a record of the model partition: where it is and the
// history it was written in.
type modelRecord struct {
	offset uint64
	epoch  HistoryEpoch
}

type modelBookmark struct {
	offset uint64
	epoch  HistoryEpoch
	seen   map[modelRecord]bool
}

// TestResolveBookmarkModel runs random partitions (appends, purges, lossy
// recoveries, retention) with consumers committing along the way, and
// checks every bookmark against the records that exist at the end: the
// resolved position skips no record the consumer has not seen and
// re-delivers none it has.
//
// covers: G6
func TestResolveBookmarkModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := Partition{Topic: topicA, History: 1}
		lineage := []HistoryTransition{{Epoch: 1, Kind: TransitionCreate}}
		var records []modelRecord // existing records, ascending offsets
		var bookmarks []modelBookmark
		drop := func(keep func(r modelRecord) bool) {
			kept := records[:0]
			for _, r := range records {
				if keep(r) {
					kept = append(kept, r)
				}
			}
			records = kept
		}
		for range rapid.IntRange(1, 40).Draw(rt, "steps") {
			switch rapid.IntRange(0, 4).Draw(rt, "op") {
			case 0: // append
				for range rapid.IntRange(1, 5).Draw(rt, "n") {
					records = append(records, modelRecord{p.HighWatermark, p.History})
					p.HighWatermark++
				}
			case 1: // purge: start = HW, next epoch
				p.History++
				p.LogStart = p.HighWatermark
				lineage = append(lineage, HistoryTransition{Epoch: p.History, Start: p.HighWatermark, Kind: TransitionPurge})
				records = records[:0]
			case 2: // lossy recovery: lose a suffix, resume above a ceiling
				if p.LogStart == p.HighWatermark {
					continue
				}
				kept := rapid.Uint64Range(p.LogStart, p.HighWatermark-1).Draw(rt, "keptEnd")
				start := p.HighWatermark + rapid.Uint64Range(0, 20).Draw(rt, "ceiling")
				p.History++
				lineage = append(lineage, HistoryTransition{Epoch: p.History, Start: start, Kind: TransitionLossyRecovery, KeptEnd: kept})
				drop(func(r modelRecord) bool { return r.offset < kept })
				p.HighWatermark = start
			case 3: // retention
				p.LogStart = rapid.Uint64Range(p.LogStart, p.HighWatermark).Draw(rt, "start")
				drop(func(r modelRecord) bool { return r.offset >= p.LogStart })
			case 4: // a consumer commits a position of the current history
				off := rapid.Uint64Range(p.LogStart, p.HighWatermark).Draw(rt, "commit")
				seen := map[modelRecord]bool{}
				for _, r := range records {
					if r.offset < off {
						seen[r] = true
					}
				}
				bookmarks = append(bookmarks, modelBookmark{off, p.History, seen})
			}
		}
		for _, b := range bookmarks {
			res, err := ResolveBookmark(p, lineage, b.offset, b.epoch)
			if err != nil {
				rt.Fatalf("bookmark %d@%d: %v", b.offset, b.epoch, err)
			}
			if res.Outcome == ResumeByPolicy {
				if res.Moved || res.Offset >= p.LogStart {
					rt.Fatalf("bookmark %d@%d: reset policy for %+v with log start %d", b.offset, b.epoch, res, p.LogStart)
				}
				continue
			}
			if res.Offset < p.LogStart || res.Offset > p.HighWatermark {
				rt.Fatalf("bookmark %d@%d resolved to %d outside [%d,%d]", b.offset, b.epoch, res.Offset, p.LogStart, p.HighWatermark)
			}
			for _, r := range records {
				if b.seen[r] && r.offset >= res.Offset {
					rt.Fatalf("bookmark %d@%d resolved to %d re-delivers seen record %d@%d", b.offset, b.epoch, res.Offset, r.offset, r.epoch)
				}
				if !b.seen[r] && r.offset < res.Offset {
					rt.Fatalf("bookmark %d@%d resolved to %d skips unseen record %d@%d", b.offset, b.epoch, res.Offset, r.offset, r.epoch)
				}
			}
		}
	})
}
