package wire_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// docTableRows returns the cells of the table rows of docs/PROTOCOL.md
// whose first cell is a hexadecimal number, in the section whose heading
// starts with heading.
func docTableRows(t *testing.T, heading string) map[uint64][]string {
	t.Helper()
	f, err := os.Open("../../docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := map[uint64][]string{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.HasPrefix(line, heading)
			continue
		}
		if !in || !strings.HasPrefix(line, "| 0x") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		v, err := strconv.ParseUint(strings.TrimPrefix(cells[0], "0x"), 16, 32)
		if err != nil {
			t.Fatalf("row %q: %v", line, err)
		}
		rows[v] = cells
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// The status table of PROTOCOL.md is the code's: same statuses, names and
// retry classes.
func TestProtocolDocStatuses(t *testing.T) {
	rows := docTableRows(t, "## 13.")
	for _, s := range allStatuses() {
		row, ok := rows[uint64(s)]
		if !ok {
			t.Errorf("%v (0x%04x) is missing from PROTOCOL.md", s, uint16(s))
			continue
		}
		if row[1] != s.String() {
			t.Errorf("0x%04x: PROTOCOL.md says %q, the code %q", uint16(s), row[1], s)
		}
		if want := strings.ReplaceAll(s.RetryClass().String(), "-", " "); row[2] != want {
			t.Errorf("%v: PROTOCOL.md says class %q, the code %q", s, row[2], want)
		}
		delete(rows, uint64(s))
	}
	for v, row := range rows {
		t.Errorf("PROTOCOL.md lists 0x%04x %q, which the code does not define", v, row[1])
	}
}

// The kind tables of PROTOCOL.md are the code's.
func TestProtocolDocKinds(t *testing.T) {
	rows := docTableRows(t, "## 7.")
	for k := wire.Kind(0); k < 0x100; k++ {
		row, listed := rows[uint64(k)]
		if listed != (k.Defined() || k.Reserved() && k < 0xFF00 && !strings.HasPrefix(k.String(), "kind 0x")) {
			t.Errorf("%v (0x%04x): listed in PROTOCOL.md %v, defined %v", k, uint16(k), listed, k.Defined())
			continue
		}
		if listed && row[1] != k.String() {
			t.Errorf("0x%04x: PROTOCOL.md says %q, the code %q", uint16(k), row[1], k)
		}
	}
}
