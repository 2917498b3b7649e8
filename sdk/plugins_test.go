package sdk

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

func TestFilterToWireSortsParameters(t *testing.T) {
	got := filterToWire("site", map[string]string{"field": "site", "equals": "lyon", "match": "guest"})
	want := wire.Filter{Name: "site", Params: []wire.FilterParam{
		{Key: "equals", Value: "lyon"}, {Key: "field", Value: "site"}, {Key: "match", Value: "guest"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("filterToWire: %+v, want %+v", got, want)
	}
	var cfg consumerConfig
	WithFilter("site", nil).applyConsumer(&cfg)
	WithCommitPolicy("checkpoint", map[string]string{"header": "eof"}).applyConsumer(&cfg)
	if cfg.filter.Name != "site" || cfg.filter.Params != nil || cfg.commitPolicy == nil || cfg.commitPolicy.Params[0].Value != "eof" {
		t.Fatalf("options: %+v %+v", cfg.filter, cfg.commitPolicy)
	}
}

// A commit policy belongs to a consumer name: an anonymous consumer is
// refused before anything is sent.
func TestCommitPolicyNeedsANamedConsumer(t *testing.T) {
	var c Client
	_, err := c.NewConsumer(context.Background(), "t", WithCommitPolicy("checkpoint", nil))
	if !errors.Is(err, ErrNotNamed) {
		t.Fatalf("err %v, want ErrNotNamed", err)
	}
}
