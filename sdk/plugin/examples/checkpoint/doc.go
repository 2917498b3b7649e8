// Command checkpoint is a Ledge commit policy: it commits only through the
// last record marked as a checkpoint, so that a consumer restarting after a
// crash resumes at a record boundary its application chose (the end of a
// transaction, a file, a frame), never in the middle.
//
// A record is a checkpoint when it carries the header named by "header"
// (default "checkpoint"); with "value", the header must also have that
// value. A poll without a checkpoint proposes nothing: the committed
// position stays where it was.
//
// Build:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o checkpoint.wasm .
package main
