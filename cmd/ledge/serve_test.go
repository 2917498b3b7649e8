package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestCertNamesOf(t *testing.T) {
	names, err := certNamesOf([]string{"ledge.example.net"}, []string{"192.168.1.10", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"localhost", "127.0.0.1", "::1", "ledge.example.net", "192.168.1.10"} {
		if !slices.Contains(names, want) {
			t.Errorf("names %v lack %s", names, want)
		}
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("names %v repeat one", names)
	}
	if _, err := certNamesOf(nil, []string{"not-an-ip"}); err == nil || !strings.Contains(err.Error(), "--cert-addrs") {
		t.Errorf("a bad address: %v, want an error naming --cert-addrs", err)
	}
	if _, err := certNamesOf([]string{"10.0.0.1"}, nil); err == nil || !strings.Contains(err.Error(), "--cert-names") {
		t.Errorf("an address as a name: %v, want an error naming --cert-names", err)
	}
}

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
