package sdk

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ledgemq/ledge/transport/wire"
)

// A filter plugin's failure reaches the application on the very poll that
// met it, whatever its retry class: Poll returns an error naming the
// plugin and the cause, errors.Is matches the sentinel, IsRetryable says
// whether polling again can help, and nothing was consumed — the next
// poll starts where the failed one did.
func TestPollReturnsAFilterFailure(t *testing.T) {
	for _, tc := range []struct {
		sentinel  error
		status    wire.Status
		msg       string
		retryable bool
	}{
		{ErrPluginTimeout, wire.StatusPluginTimeout, `plugins: plugin call timed out: "loop": ledge_filter ran past its deadline of 100ms`, false},
		{ErrPluginTrap, wire.StatusPluginTrap, `plugins: plugin trapped: "crash": ledge_filter: panic: assignment to entry in nil map`, false},
		{ErrPluginInvalidAnswer, wire.StatusPluginInvalidAnswer, `plugins: invalid plugin answer: "liar": ledge_filter: a bitmap of 3 bytes for 2 records`, false},
		{ErrPluginQuarantined, wire.StatusPluginQuarantined, `plugins: plugin quarantined: "loop" (failed 3 times, the last: ran past its deadline)`, false},
		{ErrPluginBusy, wire.StatusPluginBusy, `plugins: plugin memory budget exhausted: "hungry" needs 65536 KiB, 524288 of 524288 KiB in use`, true},
		{ErrPluginLoading, wire.StatusPluginLoading, `node: plugin loading: "site": the node started recently and is still loading its plugins`, true},
	} {
		t.Run(tc.status.String(), func(t *testing.T) {
			n := &fakeConsumerNode{t: t, log: []string{"a", "b"}, fail: func(k int) (wire.Status, string) {
				if k == 0 {
					return tc.status, tc.msg
				}
				return wire.StatusOK, ""
			}}
			c := newFakeConsumer(n, WithPrefetch(false), WithStart(AtFirst()))
			recs, err := c.Poll(context.Background())
			if err == nil || len(recs) != 0 {
				t.Fatalf("the failed poll returned %d records and error %v, want an error and no records", len(recs), err)
			}
			if !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) is false", err, tc.sentinel)
			}
			if IsRetryable(err) != tc.retryable {
				t.Errorf("IsRetryable(%v) = %v, want %v", err, IsRetryable(err), tc.retryable)
			}
			if !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.status.String()) {
				t.Errorf("the error %q does not carry the status and the node's message %q", err, tc.msg)
			}
			got, failures := pollValues(t, c, 2)
			if !slices.Equal(got, []string{"a", "b"}) || failures != 0 {
				t.Fatalf("after the failure: records %v (%d failures), want a and b", got, failures)
			}
		})
	}
}
