// Command hostile is a misbehaving plugin for the host's tests: the
// parameter "do" picks the misbehaviour.
package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/ledgemq/ledge/sdk/plugin"
)

var sink []byte
var counter uint64

func init() {
	plugin.RegisterBatchFilter(func(p plugin.Params) (plugin.BatchFilter, error) {
		do := p.String("do", "ok")
		mib, err := p.Int("mib", 1)
		if err != nil || mib < 1 {
			return nil, fmt.Errorf("mib: a positive number of MiB")
		}
		if do == "init-spin" {
			plugin.Log(plugin.LevelInfo, "spinning in init")
			for {
				counter++
			}
		}
		return func(b *plugin.Batch, keep plugin.Bitmap) error {
			switch do {
			case "ok":
				keep.KeepAll()
			case "spin":
				plugin.Log(plugin.LevelInfo, "spinning")
				for {
					counter++
				}
			case "grow":
				// Holds mib MiB, every page touched, then keeps everything.
				hold := make([][]byte, mib)
				for i := range hold {
					hold[i] = make([]byte, 1<<20)
					for j := 0; j < len(hold[i]); j += 4096 {
						hold[i][j] = 1
					}
				}
				sink = hold[mib-1]
				keep.KeepAll()
			case "alloc":
				var hoard [][]byte
				for {
					hoard = append(hoard, make([]byte, 1<<20))
					sink = hoard[len(hoard)-1]
				}
			case "panic":
				var m map[string]int
				m["boom"]++
			case "exit":
				os.Exit(3)
			case "sleep":
				time.Sleep(time.Hour) // the virtual clock: returns at once
				keep.KeepAll()
			case "gc":
				for i := 0; i < 50; i++ {
					sink = make([]byte, 1<<20)
					runtime.GC()
				}
				keep.KeepAll()
			case "file":
				_, err := os.ReadFile("/etc/hostname")
				return fmt.Errorf("reading a file: %v", err)
			case "chatty":
				for i := 0; i < 10000; i++ {
					fmt.Println("line", i)
				}
				keep.KeepAll()
			case "error":
				return fmt.Errorf("bad input at offset %d", b.Record(0).Offset())
			}
			return nil
		}, nil
	})
	plugin.RegisterCommitPolicy(func(p plugin.Params) (plugin.CommitPolicy, error) {
		do := p.String("do", "last")
		return func(b *plugin.Batch) (plugin.Proposal, error) {
			switch do {
			case "last":
				return plugin.CommitThrough(b.Record(b.Len() - 1).Offset()), nil
			case "past-next":
				return plugin.CommitThrough(b.Next() + 5), nil
			case "before-from":
				return plugin.CommitThrough(b.From() - 1), nil
			}
			return plugin.Proposal{}, nil
		}, nil
	})
}

func main() {}
