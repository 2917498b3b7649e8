package sim

import (
	"strings"
	"testing"
	"testing/synctest"
)

// TestFullDiskChecksBite: the full-disk checks fail when their rule is
// broken. With the metadata store's files on the full disk (what the
// engine does not survive yet without its ballast), a partition fails
// for a full disk; with a disk that never gets room back, appends do not
// resume. Each is found within the first seeds.
func TestFullDiskChecksBite(t *testing.T) {
	for _, c := range []struct {
		name string
		mode FullDiskMode
		want string
	}{
		{"metadata on the full disk", FullDiskMode{Meta: true}, "failed for a full disk"},
		{"no room comes back", FullDiskMode{NeverFreed: true}, "an append after the disk had room again"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := range uint64(60) {
				var r Result
				synctest.Test(t, func(t *testing.T) {
					r = Run(seed, Config{Settle: synctest.Wait, FullDisk: c.mode})
				})
				if r.Err != nil {
					if !strings.Contains(r.Err.Error(), c.want) {
						t.Fatalf("seed %d failed, but not with %q: %v", seed, c.want, r.Err)
					}
					t.Logf("seed %d: %v", seed, r.Err)
					return
				}
			}
			t.Fatalf("no seed of 60 found %q", c.want)
		})
	}
}
