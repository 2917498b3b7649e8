package sim

import "slices"

// span is a byte range [lo, hi) of a file.
type span struct{ lo, hi int64 }

// spans is a set of disjoint byte ranges, sorted.
type spans []span

// add returns s with [lo, hi) added.
func (s spans) add(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	out := make(spans, 0, len(s)+1)
	for _, x := range s {
		switch {
		case x.hi < lo || x.lo > hi:
			out = append(out, x)
		default:
			lo, hi = min(lo, x.lo), max(hi, x.hi)
		}
	}
	out = append(out, span{lo, hi})
	slices.SortFunc(out, func(a, b span) int { return int(a.lo - b.lo) })
	return out
}

// remove returns s without [lo, hi).
func (s spans) remove(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	out := make(spans, 0, len(s)+1)
	for _, x := range s {
		if x.hi <= lo || x.lo >= hi {
			out = append(out, x)
			continue
		}
		if x.lo < lo {
			out = append(out, span{x.lo, lo})
		}
		if x.hi > hi {
			out = append(out, span{hi, x.hi})
		}
	}
	return out
}

// minus returns the parts of s outside every span of t.
func (s spans) minus(t spans) spans {
	for _, x := range t {
		s = s.remove(x.lo, x.hi)
	}
	return s
}
