package testtool

import "testing"

func TestFindReportsAMissingToolAsEmpty(t *testing.T) {
	if p := Find("ledge-no-such-tool-on-any-path"); p != "" {
		t.Fatalf("Find found %q for a tool that does not exist", p)
	}
	if p := Find("ledge-no-such-tool-on-any-path", "go"); p == "" {
		t.Fatal("Find did not fall back to the second name (go is on PATH when tests run)")
	}
}
