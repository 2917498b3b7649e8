package owner_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/node/owner/ownertest"
)

// A registry's records come back in key order, a forgotten one does not
// come back, and a record that no longer decodes is an error naming it.
func TestJSONRecordsInMetadata(t *testing.T) {
	type spec struct {
		Name  string
		Parts int
	}
	ctx := context.Background()
	meta := ownertest.NewMeta()
	prefix := []byte("things/")
	for _, s := range []spec{{"b", 2}, {"a", 1}, {"c", 3}} {
		if err := owner.PutJSON(ctx, meta, append(prefix, s.Name...), s); err != nil {
			t.Fatal(err)
		}
	}
	if err := owner.ForgetJSON(ctx, meta, []byte("things/b")); err != nil {
		t.Fatal(err)
	}
	got, err := owner.ScanJSON[spec](meta, prefix, "thing")
	if err != nil {
		t.Fatal(err)
	}
	if want := []spec{{"a", 1}, {"c", 3}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("scanned %v, want %v", got, want)
	}
	if _, err := meta.Put([]byte("things/d"), []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.ScanJSON[spec](meta, prefix, "thing"); err == nil || !strings.HasPrefix(err.Error(), "thing: things/d: ") {
		t.Fatalf("a broken record: %v, want an error naming it", err)
	}
}
