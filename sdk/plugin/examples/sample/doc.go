// Command sample is a Ledge filter plugin that passes a sample of the
// records: at the edge, a consumer often needs the trend, not every
// reading.
//
// Parameters:
//
//	rate   keep each record with this probability, 0 to 1 (default 0.1)
//	every  instead of rate: keep the records whose offset is a multiple of
//	       every, the same ones on every delivery
//
// The random choice uses the sandbox's random source, seeded by the host.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sample.wasm .
package main
