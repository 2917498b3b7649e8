package fence

import "testing"

// The accepting path of every check must not allocate: fencing has to be
// close to free on the hot paths of poll, commit and produce.
//
// covers: G17
func TestAcceptingPathsDoNotAllocate(t *testing.T) {
	p, h := part(), consumer(4)
	tok := delivered(h)
	m := member(7, 5)
	mtok := delivered(m)
	lineage := []HistoryTransition{{Epoch: 1, Kind: TransitionCreate}, {Epoch: 2, Start: 10, Kind: TransitionPurge}}
	s := appended()
	reg := Registration{Epoch: 3, Known: true}
	var buf [TokenSize]byte
	checks := map[string]func(){
		"Issue":               func() { _ = Issue(p, h, 12).Through(15) },
		"CheckCurrent":        func() { must(t, CheckCurrent(p, h, tok)) },
		"CheckPollCompletion": func() { must(t, CheckPollCompletion(p, h, tok)) },
		"CheckAutoCommit":     func() { _, err := CheckAutoCommit(p, h, tok, 12); must(t, err) },
		"CheckCommit":         func() { must(t, CheckCommit(p, h, tok, 15, 12)) },
		"CheckCommit/member":  func() { must(t, CheckCommit(p, m, mtok, 15, 12)) },
		"CheckReset":          func() { must(t, CheckReset(p, h, tok, 10)) },
		"CheckProduce/next":   func() { _, err := CheckProduce(reg, s, req(3, 30, 10)); must(t, err) },
		"CheckProduce/dup":    func() { _, err := CheckProduce(reg, s, req(3, 0, 10)); must(t, err) },
		"ResolveBookmark":     func() { _, err := ResolveBookmark(p, lineage, 3, 1); must(t, err) },
		"Token.AppendBinary":  func() { _, _ = tok.AppendBinary(buf[:0]) },
		"UnmarshalToken": func() {
			b, _ := tok.AppendBinary(buf[:0])
			_, err := UnmarshalToken(b)
			must(t, err)
		},
	}
	for name, f := range checks {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per accepted check, want 0", name, n)
		}
	}
}

func must(t testing.TB, err error) {
	if err != nil {
		t.Fatal(err)
	}
}

func BenchmarkCheckPollCompletion(b *testing.B) {
	p, h := part(), consumer(4)
	tok := delivered(h)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckPollCompletion(p, h, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckCommit(b *testing.B) {
	p, h := part(), consumer(4)
	tok := delivered(h)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckCommit(p, h, tok, 15, 12); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckCommitMember(b *testing.B) {
	p, h := part(), member(7, 5)
	tok := delivered(h)
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckCommit(p, h, tok, 15, 12); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckAutoCommit(b *testing.B) {
	p, h := part(), consumer(4)
	tok := delivered(h)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckAutoCommit(p, h, tok, 12); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckProduce(b *testing.B) {
	s := appended()
	reg := Registration{Epoch: 3, Known: true}
	b.ReportAllocs()
	seq := int32(30)
	for b.Loop() {
		r := req(3, seq, 10)
		if _, err := CheckProduce(reg, s, r); err != nil {
			b.Fatal(err)
		}
		s.Record(r, 0, 9)
		seq += 10
	}
}

func BenchmarkResolveBookmark(b *testing.B) {
	p := Partition{Topic: topicA, History: 3, LogStart: 150, HighWatermark: 160}
	lineage := []HistoryTransition{
		{Epoch: 1, Kind: TransitionCreate},
		{Epoch: 2, Start: 100, KeptEnd: 10, Kind: TransitionLossyRecovery},
		{Epoch: 3, Start: 150, Kind: TransitionPurge},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ResolveBookmark(p, lineage, 5, 1); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTokenCodec(b *testing.B) {
	tok := delivered(member(7, 5))
	var buf [TokenSize]byte
	b.ReportAllocs()
	for b.Loop() {
		enc, _ := tok.AppendBinary(buf[:0])
		if _, err := UnmarshalToken(enc); err != nil {
			b.Fatal(err)
		}
	}
}
