package sim

import (
	"bytes"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashImage returns what a power loss leaves of mem, deterministically
// for a given rng state.
//
// MemFS.CrashClone keeps each unsynced block and directory entry with a
// probability, but draws its random numbers in map iteration order, so
// the same seed gives different images. So the image is built here from
// the two clones that draw nothing — the synced state (0%) and the current
// state (100%) — walking names in sorted order:
//
//   - the log's files (under topics/) follow CrashClone's rules: an entry
//     synced in its directory is there (a removal not synced is undone),
//     an unsynced new entry is there with probability pct, and a file
//     holds its synced bytes with each 4 KiB block that differs from the
//     current bytes replaced by them with probability pct;
//   - everything else (the metadata store) is taken whole from one of the
//     two states: pebble's files are renamed over each other, and mixing
//     two files of one name block by block could give images no disk
//     gives. Either state is one a power loss can leave.
//
// fates, if not nil, decides the fate of the unsynced new entries of the
// log it names (by file name, true: kept), whatever pct says: a scenario
// picks the image it tells of.
func crashImage(mem *vfs.MemFS, rng *rand.Rand, pct int, fates map[string]bool) (*vfs.MemFS, error) {
	synced := mem.CrashClone(vfs.CrashCloneCfg{})
	current := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(0, 0))})
	meta := synced
	if rng.IntN(100) < pct {
		meta = current
	}
	img := vfs.NewCrashableMem()
	var walk func(dir string) error
	walk = func(dir string) error {
		names := unionNames(synced, current, dir)
		for _, n := range names {
			path := join(dir, n)
			inS, sDir, sData, err := entry(synced, path)
			if err != nil {
				return err
			}
			inC, cDir, cData, err := entry(current, path)
			if err != nil {
				return err
			}
			if !inLog(path) {
				// Outside the log: one state, whole.
				in, isDir, data, err := entry(meta, path)
				if err != nil {
					return err
				}
				if !in {
					continue
				}
				if err := place(img, path, isDir, data); err != nil {
					return err
				}
				if isDir {
					if err := walk(path); err != nil {
						return err
					}
				}
				continue
			}
			switch {
			case inS && inC && sDir == cDir:
			case inS:
				inC = false // a removal (or replacement) not synced: undone
			case inC:
				// A new entry not synced: kept with probability pct.
				keep := rng.IntN(100) < pct
				if k, ok := fates[n]; ok {
					keep = k
				}
				if !keep {
					continue
				}
			}
			isDir, data := sDir, sData
			if inC {
				isDir, data = cDir, mergeBlocks(sData, cData, inS, rng, pct)
			}
			if err := place(img, path, isDir, data); err != nil {
				return err
			}
			if isDir {
				if err := walk(path); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	return img, nil
}

// inLog reports whether path is the log's directory or under it.
func inLog(path string) bool {
	return path == "data/topics" || strings.HasPrefix(path, "data/topics/")
}

const crashBlock = 4096

// mergeBlocks returns the synced bytes with each block where the current
// bytes differ replaced by them with probability pct (grown with zeros as
// needed). A file that has no synced state starts empty.
func mergeBlocks(s, c []byte, hasSynced bool, rng *rand.Rand, pct int) []byte {
	var out []byte
	if hasSynced {
		out = slices.Clone(s)
	}
	for i := 0; i < len(c); i += crashBlock {
		blk := c[i:min(i+crashBlock, len(c))]
		if i+len(blk) <= len(out) && bytes.Equal(out[i:i+len(blk)], blk) {
			continue
		}
		if rng.IntN(100) >= pct {
			continue
		}
		if grow := i + len(blk) - len(out); grow > 0 {
			out = append(out, make([]byte, grow)...)
		}
		copy(out[i:], blk)
	}
	return out
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func unionNames(a, b *vfs.MemFS, dir string) []string {
	list := func(fs *vfs.MemFS) []string {
		names, _ := fs.List(dir) // "" is the root
		return names
	}
	names := append(list(a), list(b)...)
	slices.Sort(names)
	return slices.Compact(names)
}

// entry reads path in fs: whether it exists, is a directory, and its
// bytes.
func entry(fs *vfs.MemFS, path string) (bool, bool, []byte, error) {
	st, err := fs.Stat(path)
	if err != nil {
		return false, false, nil, nil
	}
	if st.IsDir() {
		return true, true, nil, nil
	}
	f, err := fs.Open(path)
	if err != nil {
		return false, false, nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	return true, false, b, err
}

// place creates path in img, synced, with its parent's entry synced.
func place(img *vfs.MemFS, path string, isDir bool, data []byte) error {
	parent := img.PathDir(path)
	if parent == "." {
		parent = ""
	}
	if isDir {
		if err := img.MkdirAll(path, 0o755); err != nil {
			return err
		}
	} else {
		f, err := img.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if _, err := f.Write(data); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	d, err := img.OpenDir(parent)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
