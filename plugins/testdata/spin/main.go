// Command spin is a minimal Go guest for the interruption benchmarks: an
// empty export (the cost of a call) and a counting loop (the cost of a
// loop iteration).
package main

var sink int32

//go:wasmexport noop
func noop() int32 { return 1 }

//go:wasmexport spin
func spin(n int32) int32 {
	var s int32
	for i := int32(0); i < n; i++ {
		s += i ^ (s >> 3)
	}
	sink = s
	return s
}

func main() {}
