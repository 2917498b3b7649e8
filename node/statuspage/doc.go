// Package statuspage holds the node's status page: one self-contained HTML
// file (inline style and script, no external resources, no build step)
// that fetches api/status, relative to its own address, every two seconds
// and renders it. It works on a phone's browser as on a desktop one.
//
// The page only reads. Everything it shows comes from the JSON endpoint,
// which scripts can use directly.
package statuspage
