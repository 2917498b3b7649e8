// Command perminute is a Ledge transform that aggregates: it counts the
// records of each key per minute of their timestamps and, once a minute is
// over, outputs one record per key seen in it, with the key and the value
//
//	{"minute":1700000040000,"key":"sensor-1","count":12}
//
// (minute: the start of the minute, unix milliseconds). A minute is over
// when a record of a later minute arrives; a late record (of an earlier
// minute) is counted in the open minute. The open minute's counts are the
// transform's state, so they survive from one batch to the next, and a
// restart resumes them from the state the node stored with the outputs.
// Records with a null key are counted under the empty key.
//
// The outputs of a minute come from the record that closed it, carry the
// minute's last millisecond as their timestamp, and are ordered by key,
// so the output is a function of the input alone.
//
// Parameters: "window" in milliseconds (default 60000).
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o perminute.wasm .
package main
