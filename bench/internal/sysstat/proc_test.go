package sysstat

import (
	"os"
	"testing"
)

func TestReadSelf(t *testing.T) {
	s, err := Read(os.Getpid())
	if err != nil {
		t.Skipf("/proc not readable here: %v", err)
	}
	if s.PeakRSS <= 0 {
		t.Fatalf("peak RSS %d", s.PeakRSS)
	}
	if s.CPU < 0 || s.WriteBytes < 0 {
		t.Fatalf("negative counters: %+v", s)
	}
	d := s.Sub(s)
	if d.CPU != 0 || d.WriteBytes != 0 || d.PeakRSS != s.PeakRSS {
		t.Fatalf("delta of a sample with itself: %+v", d)
	}
}

func TestPlanLayoutDisabledSharesEveryCPU(t *testing.T) {
	l := PlanLayout(false)
	if l.Pinned || len(l.Server) == 0 || len(l.Server) != len(l.Load) {
		t.Fatalf("layout %+v", l)
	}
}
