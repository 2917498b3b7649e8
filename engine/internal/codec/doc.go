// Package codec holds the engine's small binary helpers: the envelope every
// stored value and file header carries (magic, version, non-zero length,
// CRC32C), and append/read helpers for the payloads inside it.
package codec
