package main

import (
	"fmt"
	"strings"
)

// plural counts a noun the way a person would: "1 record", "2 records",
// "0 partitions", "3 policies".
func plural(n int, noun string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	switch {
	case strings.HasSuffix(noun, "y") && !strings.HasSuffix(noun, "ey") && !strings.HasSuffix(noun, "ay"):
		noun = noun[:len(noun)-1] + "ies"
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "x"), strings.HasSuffix(noun, "ch"):
		noun += "es"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}
