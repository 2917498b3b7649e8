package quic

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Small frames sent while the stream is idle are written by Send itself,
// large ones by the writer goroutine; from several goroutines at once,
// mixed, every request still gets its own reply: frames leave in the order
// Send took them.
func TestPipelineKeepsOrderAcrossInlineAndQueuedWrites(t *testing.T) {
	ts := newTestServer(t, Config{})
	ts.serve(t, echo)
	p := pipeline(t, ts.dial(t, ClientConfig{}), 64)
	const senders, each = 4, 300
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			var replies sync.WaitGroup
			for i := range each {
				body := fmt.Sprintf("g%d-%05d", g, i)
				if i%7 == 0 { // larger than inlineWriteMax: the writer's
					body += strings.Repeat(".", inlineWriteMax)
				}
				replies.Add(1)
				err := p.Send(testContext(t), frame(body), func(reply []byte, err error) {
					defer replies.Done()
					if err != nil {
						t.Error(err)
						return
					}
					if got := bodyOf(reply); got != "echo:"+body {
						t.Errorf("request %.12s... got the reply %.18s...", body, got)
					}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					replies.Wait() // let the stream go idle now and then
				}
			}
			replies.Wait()
		})
	}
	wg.Wait()
	if err := p.Close(testContext(t)); err != nil {
		t.Errorf("Close: %v", err)
	}
}
