package transform

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/node/owner"
	"github.com/ledgemq/ledge/plugins"
)

// Errors of the transforms' administration.
var (
	// ErrConfig: a transform's specification is invalid (a name, a
	// missing topic or plugin, a parameter). Do not retry as it is.
	ErrConfig = errors.New("transform: invalid configuration")
	// ErrNoTransform: no transform has that name. Do not retry.
	ErrNoTransform = errors.New("transform: no such transform")
	// ErrExists: a transform of that name exists already (remove it
	// first). Do not retry.
	ErrExists = errors.New("transform: a transform of that name exists")
)

// GroupPrefix starts the name of the internal consumer group a transform
// runs as: transform NAME is group "__transform.NAME".
const GroupPrefix = "__transform."

// MaxNameLen is the longest transform name: its group's name must fit a
// protocol name.
const MaxNameLen = 255 - len(GroupPrefix)

// Spec is a transform as configured (`ledge transform add`) and persisted
// in the node's metadata under its name.
type Spec struct {
	Name   string            `json:"name"`
	Plugin string            `json:"plugin"`
	From   string            `json:"from"`
	To     string            `json:"to"`
	Params map[string]string `json:"params,omitempty"`
	// FromID and ToID are the topics' identities when the transform was
	// added: a topic deleted and re-created under the same name is not
	// the transform's any more, and the transform stops with an error.
	FromID fence.TopicID `json:"from_id"`
	ToID   fence.TopicID `json:"to_id"`
	// Paused: the transform is stopped until resumed; its group has no
	// member and its lag grows.
	Paused bool `json:"paused,omitempty"`
}

// Group is the name of the transform's internal consumer group.
func (s Spec) Group() string { return GroupPrefix + s.Name }

// Validate checks what can be checked without the node's topics and
// plugins.
func (s Spec) Validate() error {
	switch {
	case !validName(s.Name):
		return fmt.Errorf("%w: name %q: want 1 to %d letters, digits, '.', '_' or '-'", ErrConfig, s.Name, MaxNameLen)
	case s.Plugin == "":
		return fmt.Errorf("%w: no plugin", ErrConfig)
	case s.From == "":
		return fmt.Errorf("%w: no input topic (--from)", ErrConfig)
	case s.To == "":
		return fmt.Errorf("%w: no output topic (--to)", ErrConfig)
	case s.From == s.To:
		return fmt.Errorf("%w: topic %q would be both the input and the output", ErrConfig, s.From)
	}
	if _, err := plugins.ParseParams(paramList(s.Params)); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return nil
}

func paramList(p map[string]string) []string {
	out := make([]string, 0, len(p))
	for _, k := range slices.Sorted(maps.Keys(p)) {
		out = append(out, k+"="+p[k])
	}
	return out
}

func validName(s string) bool {
	if s == "" || len(s) > MaxNameLen {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

var keyTransforms = []byte("transforms/")

func specKey(name string) []byte {
	return append(append([]byte(nil), keyTransforms...), name...)
}

// saveSpec persists spec and waits until it is durable.
func saveSpec(ctx context.Context, meta owner.Metadata, spec Spec) error {
	return owner.PutJSON(ctx, meta, specKey(spec.Name), spec)
}

// removeSpec forgets a transform (an empty value: the metadata store has
// no delete) and waits until that is durable.
func removeSpec(ctx context.Context, meta owner.Metadata, name string) error {
	return owner.ForgetJSON(ctx, meta, specKey(name))
}

// loadSpecs returns the persisted transforms.
func loadSpecs(meta owner.Metadata) ([]Spec, error) {
	return owner.ScanJSON[Spec](meta, keyTransforms, "transform")
}
