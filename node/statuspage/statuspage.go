package statuspage

import _ "embed"

//go:embed index.html
var page string

// HTML returns the status page.
func HTML() string { return page }
