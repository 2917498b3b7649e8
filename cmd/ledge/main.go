// Command ledge is the Ledge message node and its command-line client.
//
// One binary serves the node (ledge serve), administers it (topics, tokens,
// plugins) and talks to it as a client (produce, consume).
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ledge:", explain(err))
		os.Exit(1)
	}
}
