package abi

import (
	"errors"
	"fmt"
	"math/bits"
)

// ErrBadAnswer reports a plugin answer that does not follow the layout.
var ErrBadAnswer = errors.New("abi: malformed answer")

// Bitmap is a filter's answer: one bit per record of a region, set when
// the record is kept. It may alias guest memory or a region's answer area.
type Bitmap struct {
	bits []byte
	n    int
}

// NewBitmap returns a bitmap of n records, none kept.
func NewBitmap(n int) Bitmap { return Bitmap{bits: make([]byte, BitmapSize(n)), n: n} }

// BitmapOver returns a bitmap of n records stored in b, which must hold at
// least BitmapSize(n) bytes. The bitmap aliases b.
func BitmapOver(b []byte, n int) Bitmap { return Bitmap{bits: b[:BitmapSize(n)], n: n} }

// ParseBitmap checks that b is exactly the bitmap of n records, its bits
// past n clear, and returns it aliasing b.
func ParseBitmap(b []byte, n int) (Bitmap, error) {
	if len(b) != BitmapSize(n) {
		return Bitmap{}, fmt.Errorf("%w: bitmap of %d bytes for %d records, want %d", ErrBadAnswer, len(b), n, BitmapSize(n))
	}
	if r := n % 8; r != 0 && b[len(b)-1]>>r != 0 {
		return Bitmap{}, fmt.Errorf("%w: bitmap sets bits past record %d", ErrBadAnswer, n-1)
	}
	return Bitmap{bits: b, n: n}, nil
}

// Len returns the number of records the bitmap covers.
func (m Bitmap) Len() int { return m.n }

// Kept reports whether record i is kept.
func (m Bitmap) Kept(i int) bool {
	m.check(i)
	return m.bits[i>>3]&(1<<(i&7)) != 0
}

// Keep marks record i as kept.
func (m Bitmap) Keep(i int) {
	m.check(i)
	m.bits[i>>3] |= 1 << (i & 7)
}

// Drop marks record i as dropped.
func (m Bitmap) Drop(i int) {
	m.check(i)
	m.bits[i>>3] &^= 1 << (i & 7)
}

// Set keeps record i when keep is true and drops it otherwise.
func (m Bitmap) Set(i int, keep bool) {
	if keep {
		m.Keep(i)
	} else {
		m.Drop(i)
	}
}

// KeepAll marks every record as kept.
func (m Bitmap) KeepAll() {
	for i := range m.bits {
		m.bits[i] = 0xFF
	}
	if r := m.n % 8; r != 0 {
		m.bits[len(m.bits)-1] = 1<<r - 1
	}
}

// Count returns the number of kept records.
func (m Bitmap) Count() int {
	c := 0
	for _, b := range m.bits {
		c += bits.OnesCount8(b)
	}
	return c
}

// Bytes returns the bitmap's bytes.
func (m Bitmap) Bytes() []byte { return m.bits }

// Clone returns a copy that does not alias m.
func (m Bitmap) Clone() Bitmap {
	return Bitmap{bits: append([]byte(nil), m.bits...), n: m.n}
}

func (m Bitmap) check(i int) {
	if uint(i) >= uint(m.n) {
		panic(fmt.Sprintf("abi: bitmap index %d of %d", i, m.n))
	}
}

// Proposal is a commit policy's answer: commit nothing, or commit through
// an offset (the committed position becomes Through+1).
type Proposal struct {
	Commit  bool
	Through uint64
}

// Position returns the committed position the proposal asks for: Through+1.
// It is meaningful only when Commit is set.
func (p Proposal) Position() uint64 { return p.Through + 1 }

// String describes the proposal.
func (p Proposal) String() string {
	if !p.Commit {
		return "none"
	}
	return fmt.Sprintf("commit through %d", p.Through)
}

// Put writes p in the proposal layout into b[:ProposalSize].
func (p Proposal) Put(b []byte) {
	_ = b[ProposalSize-1]
	clear(b[:ProposalSize])
	if p.Commit {
		le.PutUint32(b, ProposeCommit)
		le.PutUint64(b[8:], p.Through)
	}
}

// ParseProposal reads a proposal answer; b must be exactly ProposalSize
// bytes. A proposal with ProposeNone must have a zero offset.
func ParseProposal(b []byte) (Proposal, error) {
	if len(b) != ProposalSize {
		return Proposal{}, fmt.Errorf("%w: proposal of %d bytes, want %d", ErrBadAnswer, len(b), ProposalSize)
	}
	d, res, through := le.Uint32(b), le.Uint32(b[4:]), le.Uint64(b[8:])
	switch {
	case res != 0:
		return Proposal{}, fmt.Errorf("%w: proposal reserved field is %#x", ErrBadAnswer, res)
	case d == ProposeNone && through != 0:
		return Proposal{}, fmt.Errorf("%w: proposal \"none\" carries offset %d", ErrBadAnswer, through)
	case d == ProposeNone:
		return Proposal{}, nil
	case d == ProposeCommit:
		return Proposal{Commit: true, Through: through}, nil
	}
	return Proposal{}, fmt.Errorf("%w: proposal decision %d (want 0 none or 1 commit)", ErrBadAnswer, d)
}
