package plugins

// Data segments. A module built by Go has an active data segment for
// every run of non-zero bytes of its data: 33,019 of them in a small
// plugin (801 KB in all). wazero evaluates each one's offset and records
// it every time it starts an instance, and those allocations were most
// of the Go heap a node allocated beside plugins whose failing calls
// discard their instances (RATIONALE.md, "Data segments"). The rewrite
// merges active segments that follow each other
// in memory, at most dataMergeGap bytes apart, into one, the gap filled
// with zeros, which is what memory holds before the segments are
// applied.

// dataMergeGap is the largest gap between two segments that merging
// fills with zeros: 64 bytes cost less to copy than a segment costs to
// set up.
const dataMergeGap = 64

// maxDataRuns is the most merged segments a section may come to; a
// section that does not merge into so few stays as it is.
const maxDataRuns = 128

// mergeData returns the content of a data section with its adjacent
// active segments merged. It returns content unchanged unless every
// segment is active in memory 0 at an i32.const offset: other segments
// may be referred to by index, and offsets read from globals are not
// known here. A module whose instructions refer to segments has a data
// count section, and the caller does not merge then.
func mergeData(content []byte) []byte {
	r := &wasmReader{b: content, what: "data section"}
	n := r.count(3)
	segs := make([]dataSegment, 0, n)
	for range n {
		if flag := r.u32(); flag != 0 || r.byte() != 0x41 {
			return content
		}
		offset := uint32(decodeS32(r.sleb(32)))
		if r.byte() != 0x0B {
			return content
		}
		data := r.bytes(uint64(r.u32()))
		if r.err != nil {
			return content
		}
		segs = append(segs, dataSegment{uint64(offset), data})
	}
	if r.err != nil || !r.done() {
		return content
	}

	// A gap is filled with zeros only if no earlier segment wrote into
	// it: checked against the merged runs so far, at most maxDataRuns of
	// them (past that, merging is not worth it and the section stays).
	var merged []dataSegment
	for _, s := range segs {
		if k := len(merged) - 1; k >= 0 {
			last := &merged[k]
			lastEnd := last.start + uint64(len(last.data))
			if s.start >= lastEnd && s.start-lastEnd <= dataMergeGap && !overlaps(merged[:k], lastEnd, s.start) {
				last.data = append(last.data, make([]byte, s.start-lastEnd)...)
				last.data = append(last.data, s.data...)
				continue
			}
		}
		if len(merged) == maxDataRuns {
			return content
		}
		// A copy: merging appends to it.
		merged = append(merged, dataSegment{s.start, append([]byte(nil), s.data...)})
	}
	if len(merged) == len(segs) {
		return content
	}
	out := appendU32(nil, uint32(len(merged)))
	for _, s := range merged {
		out = append(out, 0, 0x41)
		out = appendS64(out, int64(int32(uint32(s.start))))
		out = append(out, 0x0B)
		out = appendU32(out, uint32(len(s.data)))
		out = append(out, s.data...)
	}
	return out
}

// dataSegment is an active segment: its bytes, written at start.
type dataSegment struct {
	start uint64
	data  []byte
}

// overlaps reports whether one of segs covers a byte of [from, to).
func overlaps(segs []dataSegment, from, to uint64) bool {
	for _, s := range segs {
		if s.start < to && s.start+uint64(len(s.data)) > from {
			return true
		}
	}
	return false
}

// decodeS32 decodes the signed LEB128 bytes that sleb(32) checked.
func decodeS32(b []byte) int32 {
	var v int64
	var shift uint
	for _, c := range b {
		v |= int64(c&0x7F) << shift
		shift += 7
		if c&0x80 == 0 && c&0x40 != 0 && shift < 64 {
			v |= -1 << shift
		}
	}
	return int32(v)
}
