package owner

import (
	"context"
	"encoding/json"
	"fmt"
)

// The node's registries of long-running work (uplinks, downlinks,
// transforms) keep one JSON record a key in the node's metadata. An empty
// value is a forgotten record: the metadata store has no delete.

// PutJSON writes v, as JSON, under key and waits until it is durable.
func PutJSON(ctx context.Context, meta Metadata, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return putSynced(ctx, meta, key, b)
}

// ForgetJSON writes an empty value under key and waits until it is
// durable: ScanJSON skips it from then on.
func ForgetJSON(ctx context.Context, meta Metadata, key []byte) error {
	return putSynced(ctx, meta, key, nil)
}

func putSynced(ctx context.Context, meta Metadata, key, value []byte) error {
	t, err := meta.Put(key, value)
	if err != nil {
		return err
	}
	return meta.Sync(ctx, t)
}

// ScanJSON decodes every record under prefix, in key order, skipping the
// forgotten ones. what names the records in an error ("uplink").
func ScanJSON[T any](meta Metadata, prefix []byte, what string) ([]T, error) {
	var out []T
	err := meta.Scan(prefix, func(k, v []byte) error {
		if len(v) == 0 {
			return nil
		}
		var rec T
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%s: %s: %w", what, k, err)
		}
		out = append(out, rec)
		return nil
	})
	return out, err
}
