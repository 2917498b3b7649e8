package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestServeHelp(t *testing.T) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--data-dir", "--listen", "--cert-names", "--cert-addrs", "ledge serve", "127.0.0.1:7420"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out.String())
		}
	}
}
