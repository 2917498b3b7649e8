// Package logging builds the node's log/slog logger from its two settings:
// the format (text for a person at a terminal, JSON for a log collector)
// and the level.
//
// It is not a logging framework: the node logs through *slog.Logger and
// nothing else, and this package only decides how those records are
// written.
package logging
