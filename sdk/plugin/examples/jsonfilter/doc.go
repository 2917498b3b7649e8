// Command jsonfilter is a Ledge filter plugin: it keeps the records whose
// value is a JSON object with a field equal to a given value.
//
// Parameters:
//
//	field   the member to test, a dot-separated path ("site", "device.site"); required
//	equals  the value it must equal: a string's text, or a number, true,
//	        false or null as written; required
//	match   where the matching runs: "native" (default: one host call per
//	        batch), "record" (one host call per record) or "guest" (inside
//	        the plugin, no host call)
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonfilter.wasm .
package main
