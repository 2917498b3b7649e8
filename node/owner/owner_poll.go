package owner

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/ledgemq/ledge/fence"
	"github.com/ledgemq/ledge/record"
)

// Position says where a poll starts.
type Position uint8

const (
	// FromOffset starts at PollRequest.Offset.
	FromOffset Position = iota
	// FromFirst starts at the log start offset.
	FromFirst
	// FromLast starts at the last record (the high watermark if the log
	// is empty).
	FromLast
	// FromEnd starts at the high watermark: only records appended from now.
	FromEnd
	// FromNext continues the consumer: its delivered position while that
	// is current, else its committed offset resolved in the current
	// history, else the reset policy.
	FromNext
)

// ResetPolicy says where FromNext starts when the consumer has no usable
// position: no bookmark, or one that retention overtook.
type ResetPolicy uint8

const (
	// ResetEarliest starts at the log start offset (the default).
	ResetEarliest ResetPolicy = iota
	// ResetLatest starts at the high watermark.
	ResetLatest
	// ResetNone fails the poll with ErrNoPosition.
	ResetNone
)

// AutoCommit says whether and when a poll commits what it delivers.
type AutoCommit uint8

const (
	// AutoCommitOff commits nothing; the consumer commits with the token.
	AutoCommitOff AutoCommit = iota
	// AutoCommitOnDelivery commits the end of what a poll returns before
	// the reply leaves (at most once).
	AutoCommitOnDelivery
	// AutoCommitOnNextPoll commits, at the start of a poll, what the
	// consumer's previous poll delivered (at least once).
	AutoCommitOnNextPoll
)

// ErrNoPosition: a FromNext poll with ResetNone found no usable position.
var ErrNoPosition = errors.New("owner: the consumer has no committed position and the reset policy is none")

// ErrNoConsumer: the request needs a named consumer or a group member.
var ErrNoConsumer = errors.New("owner: the request needs a consumer name")

// PollRequest is one partition's part of a poll.
type PollRequest struct {
	Consumer   Consumer
	From       Position
	Offset     uint64 // for FromOffset
	Reset      ResetPolicy
	AutoCommit AutoCommit
	// MaxBytes bounds the bytes of the reply, in whole stored batches: at
	// least one batch is returned, and a further batch only if the reply
	// stays within MaxBytes. Default 1 MiB.
	MaxBytes int
	// MaxMessages bounds the records of the reply the same way: whole
	// batches, at least one, and a further batch only if the records
	// delivered (those at or after the poll's position) stay within
	// MaxMessages. 0: no bound by count.
	MaxMessages int
	// MaxWait is how long a poll that finds nothing to read waits for
	// records. 0 answers at once.
	MaxWait time.Duration
	// Transform, when set, runs on the read result after the read, off
	// the owner and before the completion (a filter plugin): it gets the
	// poll's position and the immutable result and returns the batches
	// to deliver. It cannot move the position: the completion validates
	// the token and advances to the read's Next as without it. An error
	// fails the poll with no change of progress.
	Transform func(ctx context.Context, from uint64, res ReadResult) (ReadResult, error)
	// Key, when keyed, delivers only the records whose key it matches, in
	// node-built batches; Next still passes every record read. A poll
	// that read only records of other keys reads on past them, each read
	// planned and fenced like a parked poll waking, up to the high
	// watermark (an immediate poll answers there, empty) and, a long
	// poll, as records arrive until MaxWait, parked in the owner's key
	// index where only a record it matches wakes it. Its token covers
	// every position it read, from the first.
	Key KeyMatch
}

// PollResult is a validated poll reply.
type PollResult struct {
	// Batches are whole stored batches, immutable.
	Batches [][]byte
	// Next is the position after the delivered records.
	Next uint64
	// Token is the fence token of the delivery, covering [From, Next).
	Token fence.Token
	// State is the partition's state at the completion.
	State PartitionState

	release func()
}

// Release gives the memory of Batches back to the storage engine once the
// caller is done with them (a server, once the reply is written); nothing
// may use them afterwards. Optional: a result never released is garbage
// collected.
func (r *PollResult) Release() {
	if r.release != nil {
		r.release()
		r.release = nil
	}
}

// pendingPoll is a planned poll: its token, and either a read plan, a
// channel to park on, a key poll's filtered read, or none of them
// (nothing to read, answer at once).
type pendingPoll struct {
	tok fence.Token
	// cursor is where the next read starts: tok.From, or, for a key
	// poll, past the records of other keys it read.
	cursor uint64
	plan   ReadPlan
	wait   <-chan struct{}
	// waiter is a key poll's place in the key index while it parks there;
	// until, when above the high watermark, is an offset below which a
	// record the key poll matches was appended: it waits for the high
	// watermark instead.
	waiter *keyWaiter
	until  uint64
	// matched: the key index woke this key poll for a record of its key;
	// a wait for the high watermark to reach that record is the same
	// wake-up, not another.
	matched bool
	// kept is a key poll's read, filtered, when hasKept.
	kept    ReadResult
	hasKept bool
}

// Poll reads from the partition through the poll lifecycle: plan on the
// owner, read off it, complete on it. A completion whose world changed
// while the read ran (a purge, a new session, a reassignment) is refused
// with a retryable fence error: no records, no change of progress. A poll
// that finds nothing waits up to MaxWait; when it wakes it re-validates.
func (o *Owner) Poll(ctx context.Context, req PollRequest) (PollResult, error) {
	pend, err := o.prepare(ctx, req, nil)
	if err != nil {
		return PollResult{}, err
	}
	if pend.wait != nil {
		defer func() { o.stopWaiting(&pend) }()
		timer := time.NewTimer(req.MaxWait)
		defer timer.Stop()
		for pend.wait != nil {
			select {
			case <-pend.wait:
				o.woke(req, &pend)
				prev := pend
				if pend, err = o.prepare(ctx, req, &prev); err != nil {
					return PollResult{}, err
				}
			case <-timer.C:
				o.stopWaiting(&pend)
			case <-o.closing:
				return PollResult{}, o.closeReason
			case <-ctx.Done():
				return PollResult{}, ctx.Err()
			}
		}
	}
	return o.readAndComplete(ctx, req, pend)
}

// woke is the first thing a parked poll does when its channel fired: a
// key poll takes what its waking says and counts it.
func (o *Owner) woke(req PollRequest, pend *pendingPoll) {
	if !req.Key.Keyed() {
		return
	}
	if w := pend.waiter; w != nil {
		// No record between the poll's position and the one that woke it
		// is of its key: every one was scanned against it. It reads from
		// that record, whatever number of others came before it.
		pend.cursor = max(pend.cursor, w.at)
		pend.until = max(pend.until, w.until)
		pend.waiter, pend.matched = nil, true
		o.keys.woken.Add(1)
		return
	}
	if !pend.matched {
		o.keys.woken.Add(1)
	}
}

// stopWaiting ends a parked poll's wait: it leaves the key index, if it
// was in it.
func (o *Owner) stopWaiting(pend *pendingPoll) {
	if pend.waiter != nil {
		o.keys.unpark(pend.waiter)
		pend.waiter = nil
	}
	pend.wait = nil
}

// prepare plans a poll, or re-plans a parked one (prev). A key poll's
// reads run here, off the owner, each planned by it: until one keeps a
// record, or the poll reaches the high watermark (where a long poll
// parks).
func (o *Owner) prepare(ctx context.Context, req PollRequest, prev *pendingPoll) (pendingPoll, error) {
	pend, err := o.plan(req, prev)
	if err != nil || !req.Key.Keyed() {
		return pend, err
	}
	for pend.plan != nil {
		res, err := pend.plan.Execute(ctx)
		pend.plan.Release()
		pend.plan = nil
		if err != nil {
			return pendingPoll{}, err
		}
		res = limitMessages(res, pend.cursor, req.MaxMessages)
		kept, err := keyFiltered(res.Batches, pend.cursor, req.Key, pollBytes(req))
		if res.Release != nil {
			res.Release()
		}
		if err != nil {
			return pendingPoll{}, err
		}
		if len(kept) > 0 {
			pend.kept, pend.hasKept = ReadResult{Batches: kept, Next: res.Next}, true
			return pend, nil
		}
		// Only records of other keys: read on past them, as a new step.
		next := pend
		next.cursor = res.Next
		if pend, err = o.plan(req, &next); err != nil {
			return pendingPoll{}, err
		}
	}
	return pend, nil
}

func pollBytes(req PollRequest) int {
	if req.MaxBytes <= 0 {
		return 1 << 20
	}
	return req.MaxBytes
}

func (o *Owner) readAndComplete(ctx context.Context, req PollRequest, pend pendingPoll) (PollResult, error) {
	res := ReadResult{Next: pend.cursor}
	if pend.hasKept {
		res = pend.kept
	}
	if pend.plan != nil {
		var err error
		res, err = pend.plan.Execute(ctx)
		pend.plan.Release()
		if err != nil {
			return PollResult{}, err
		}
		res = limitMessages(res, pend.cursor, req.MaxMessages)
	}
	if req.Transform != nil && (pend.plan != nil || pend.hasKept) {
		// A filter's result may keep parts of the batches it was given:
		// their memory goes back only with the result's.
		next, release := res.Next, res.Release
		var err error
		if res, err = req.Transform(ctx, pend.cursor, res); err != nil {
			if release != nil {
				release()
			}
			return PollResult{}, err
		}
		res.Next, res.Release = next, release
	}
	pr, err := o.complete(ctx, req, pend.tok, res)
	if err != nil && res.Release != nil {
		res.Release()
	}
	return pr, err
}

// limitMessages keeps the batches of res that a poll from position from
// may deliver under maxMessages: the first batch always, each further one
// only if the records delivered stay within maxMessages. Records of the
// first batch below from are not delivered and do not count.
func limitMessages(res ReadResult, from uint64, maxMessages int) ReadResult {
	if maxMessages <= 0 || len(res.Batches) < 2 {
		return res
	}
	var count, prevLast uint64
	for i, b := range res.Batches {
		h, err := record.ParseBatchHeader(b)
		if err != nil {
			// Stored batches were verified at append; keep what the
			// read returned and let the client's checks speak.
			return res
		}
		last := h.LastOffset()
		if last >= from {
			count += last + 1 - max(from, h.BaseOffset)
		}
		if i > 0 && count > uint64(maxMessages) {
			return ReadResult{Batches: res.Batches[:i], Next: prevLast + 1, Release: res.Release}
		}
		prevLast = last
	}
	return res
}

// plan is the first owner step of a poll. With prev set, it is a parked
// poll waking, or a key poll reading on: the world must still be the one
// its token was issued in.
func (o *Owner) plan(req PollRequest, prev *pendingPoll) (pendingPoll, error) {
	var changed <-chan struct{}
	if req.MaxWait > 0 {
		// Taken before the state is read, so no change after it is missed.
		changed = o.log.Changed()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.refuseClosed(); err != nil {
		return pendingPoll{}, err
	}
	p := o.facts()
	h := o.holder(req.Consumer)
	var pend pendingPoll
	if prev != nil {
		if err := fence.CheckCurrent(p, h, prev.tok); err != nil {
			return pendingPoll{}, err
		}
		pend = pendingPoll{tok: prev.tok, cursor: prev.cursor, until: prev.until, matched: prev.matched}
	} else {
		if err := o.checkRequester(req.Consumer, h); err != nil {
			return pendingPoll{}, err
		}
		pr := o.progressOf(req.Consumer)
		if req.AutoCommit == AutoCommitOnNextPoll && pr != nil && !pr.delivered.IsZero() {
			if err := o.applyQueuedCommit(p, h, pr); err != nil {
				return pendingPoll{}, err
			}
		}
		from, err := o.position(p, h, pr, req)
		if err != nil {
			return pendingPoll{}, err
		}
		if err := fence.CheckPosition(p, from); err != nil {
			return pendingPoll{}, err
		}
		tok := fence.Issue(p, h, from)
		pend = pendingPoll{tok: tok, cursor: tok.From}
	}
	if pend.cursor >= p.HighWatermark {
		switch {
		case changed == nil:
		case !req.Key.Keyed() || pend.until > p.HighWatermark:
			pend.wait = changed
		default:
			w, until := o.keys.park(req.Key, pend.cursor)
			if w == nil {
				pend.until, pend.wait = until, changed
			} else {
				pend.waiter, pend.wait = w, w.woke
			}
		}
		return pend, nil
	}
	plan, err := o.log.PlanRead(pend.cursor, pollBytes(req))
	if err != nil {
		return pendingPoll{}, fmt.Errorf("owner: planning a read at %d: %w", pend.cursor, err)
	}
	pend.plan = plan
	return pend, nil
}

// applyQueuedCommit applies a commit-on-next-poll: the end of the previous
// delivery, if its token is still current. A stale one is dropped, along
// with the delivered position it came from. Called with o.mu held.
func (o *Owner) applyQueuedCommit(p fence.Partition, h fence.Holder, pr *progress) error {
	floor, err := o.committedFloor(p, pr)
	if err != nil {
		return err
	}
	advance, err := fence.CheckAutoCommit(p, h, pr.delivered, floor)
	if err != nil {
		pr.delivered = fence.Token{}
		return nil
	}
	if advance {
		// Not waited for: losing it in a crash re-delivers one poll's worth,
		// which at-least-once allows.
		_, err = o.setCommitted(pr, Bookmark{Offset: pr.delivered.Next, History: p.History})
	}
	return err
}

// position resolves where a new poll starts. Called with o.mu held.
func (o *Owner) position(p fence.Partition, h fence.Holder, pr *progress, req PollRequest) (uint64, error) {
	switch req.From {
	case FromOffset:
		return req.Offset, nil
	case FromFirst:
		return p.LogStart, nil
	case FromLast:
		if p.HighWatermark > p.LogStart {
			return p.HighWatermark - 1, nil
		}
		return p.HighWatermark, nil
	case FromEnd:
		return p.HighWatermark, nil
	case FromNext:
		if pr == nil {
			return 0, ErrNoConsumer
		}
		return o.nextPosition(p, h, pr, req.Reset)
	}
	return 0, fmt.Errorf("owner: unknown poll position %d", req.From)
}

// nextPosition is where "next" reads: the delivered position while it is
// current, else the committed offset resolved in the current history, else
// the reset policy. Called with o.mu held.
func (o *Owner) nextPosition(p fence.Partition, h fence.Holder, pr *progress, reset ResetPolicy) (uint64, error) {
	if !pr.delivered.IsZero() {
		if fence.CheckCurrent(p, h, pr.delivered) == nil {
			if pr.delivered.Next >= p.LogStart {
				return pr.delivered.Next, nil
			}
			return resetPosition(p, reset)
		}
		pr.delivered = fence.Token{}
	}
	res, ok, err := o.resolveCommitted(p, pr)
	if err != nil {
		return 0, err
	}
	if ok && res.Outcome == fence.ResumeAt {
		return res.Offset, nil
	}
	return resetPosition(p, reset)
}

func resetPosition(p fence.Partition, reset ResetPolicy) (uint64, error) {
	switch reset {
	case ResetLatest:
		return p.HighWatermark, nil
	case ResetNone:
		return 0, ErrNoPosition
	}
	return p.LogStart, nil
}

// complete is the last owner step of a poll, in one critical section:
// validate the token extended to the read's end, apply a commit-on-delivery,
// advance the delivered position, authorize the reply. A commit-on-delivery
// reply leaves only once its commit is durable.
func (o *Owner) complete(ctx context.Context, req PollRequest, tok fence.Token, res ReadResult) (PollResult, error) {
	o.mu.Lock()
	if err := o.refuseClosed(); err != nil {
		o.mu.Unlock()
		return PollResult{}, err
	}
	p := o.facts()
	h := o.holder(req.Consumer)
	t := tok.Through(res.Next)
	if err := fence.CheckPollCompletion(p, h, t); err != nil {
		o.mu.Unlock()
		return PollResult{}, err
	}
	pr := o.progressOf(req.Consumer)
	var commit Durable
	if pr != nil && req.AutoCommit == AutoCommitOnDelivery {
		floor, err := o.committedFloor(p, pr)
		var advance bool
		if err == nil {
			advance, err = fence.CheckAutoCommit(p, h, t, floor)
		}
		if err == nil && advance {
			commit, err = o.setCommitted(pr, Bookmark{Offset: t.Next, History: p.History})
		}
		if err != nil {
			o.mu.Unlock()
			return PollResult{}, err
		}
	}
	if pr != nil {
		pr.delivered = t
	}
	o.mu.Unlock()
	if err := commit.Wait(ctx); err != nil {
		return PollResult{}, err
	}
	return PollResult{Batches: res.Batches, Next: t.Next, Token: t, State: p, release: res.Release}, nil
}

// PartitionPoll is one partition of a multi-partition poll.
type PartitionPoll struct {
	Owner   *Owner
	Request PollRequest // its MaxWait is ignored: PollMany's applies
}

// PartitionResult is one partition's answer to a multi-partition poll.
type PartitionResult struct {
	Result PollResult
	Err    error
}

// PollMany polls several partitions at once. If none has records it waits
// up to maxWait for any of them to change; every parked partition is
// re-validated when the poll wakes. Each partition answers on its own: a
// stale partition's fence error does not fail the others.
func PollMany(ctx context.Context, polls []PartitionPoll, maxWait time.Duration) []PartitionResult {
	return PollManyUntil(ctx, polls, maxWait, Interrupts{}, nil)
}

// Interrupts are channels that end a parked poll's wait as the end of its
// context would (its partitions fail with context.Canceled): a server's
// shutdown, the deletion of the topic polled. Nil ones never fire. They
// do not interrupt a read: reads are bounded, and a poll whose topic was
// deleted meanwhile fails at its completion.
type Interrupts [2]<-chan struct{}

// PollManyUntil is PollMany whose wait also ends when one of stop fires.
// Waiting on them directly costs a device's command poll nothing, where
// a context canceled by each was three contexts and their callbacks. The
// results are written into out's array when it has room for them (a
// server reuses it from one poll to the next).
func PollManyUntil(ctx context.Context, polls []PartitionPoll, maxWait time.Duration, stop Interrupts, out []PartitionResult) []PartitionResult {
	if cap(out) < len(polls) {
		out = make([]PartitionResult, len(polls))
	}
	out = out[:len(polls)]
	clear(out)
	// A poll of one partition (a device's) keeps its state on the stack.
	var onePend [1]pendingPoll
	var oneLive [1]bool
	pend, live := onePend[:], oneLive[:]
	if len(polls) != 1 {
		pend, live = make([]pendingPoll, len(polls)), make([]bool, len(polls))
	}
	plan := func(i int, prev *pendingPoll) {
		req := polls[i].Request
		req.MaxWait = maxWait
		var err error
		pend[i], err = polls[i].Owner.prepare(ctx, req, prev)
		live[i] = err == nil
		if err != nil {
			out[i].Err = err
		}
	}
	var timer *time.Timer
	defer func() {
		for i := range polls {
			polls[i].Owner.stopWaiting(&pend[i])
		}
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := range polls {
		plan(i, nil)
	}
	for {
		ready, waiting := false, false
		for i := range polls {
			if live[i] {
				ready = ready || pend[i].wait == nil
				waiting = waiting || pend[i].wait != nil
			}
		}
		if ready || !waiting {
			break
		}
		if timer == nil {
			timer = time.NewTimer(maxWait) // stopped by the deferred function
		}
		chosen := waitParked(ctx, stop, timer.C, polls, pend, live)
		if chosen == wokeDone {
			err := ctx.Err()
			if err == nil {
				err = context.Canceled // one of stop fired
			}
			for i := range polls {
				if live[i] {
					out[i].Err, live[i] = err, false
				}
			}
			return out
		}
		if chosen == wokeTimer {
			break
		}
		// Something changed: re-validate every parked partition (a closed
		// owner refuses its own) but the key polls that no record of
		// theirs woke, which wait on.
		for i := range polls {
			if !live[i] || pend[i].wait == nil {
				continue
			}
			select {
			case <-pend[i].wait:
				polls[i].Owner.woke(polls[i].Request, &pend[i])
			default:
				if pend[i].waiter != nil && !polls[i].Owner.closed.Load() {
					continue
				}
			}
			polls[i].Owner.stopWaiting(&pend[i])
			prev := pend[i]
			plan(i, &prev)
		}
	}
	for i := range polls {
		if !live[i] {
			continue
		}
		polls[i].Owner.stopWaiting(&pend[i])
		req := polls[i].Request
		out[i].Result, out[i].Err = polls[i].Owner.readAndComplete(ctx, req, pend[i])
	}
	return out
}

// What ended a parked multi-partition poll's wait.
const (
	wokeDone    = iota // the poll's context
	wokeTimer          // its wait ran out
	wokeChanged        // a parked partition changed, or its owner closed
)

// waitParked waits for the poll's context or interrupts, its timer, or a
// change of one of its parked partitions (or of their owners' closing). A parked poll
// waits on the goroutine of its request, which would otherwise wait for
// the next request of its stream: it costs no goroutine of its own. One
// parked partition, a device's poll of its own command partition, waits
// in a plain select; several in reflect.Select, which allocates its cases.
func waitParked(ctx context.Context, stop Interrupts, timer <-chan time.Time, polls []PartitionPoll, pend []pendingPoll, live []bool) int {
	one, parked := -1, 0
	for i := range polls {
		if live[i] && pend[i].wait != nil {
			one, parked = i, parked+1
		}
	}
	if parked == 1 {
		select {
		case <-ctx.Done():
			return wokeDone
		case <-stop[0]:
			return wokeDone
		case <-stop[1]:
			return wokeDone
		case <-timer:
			return wokeTimer
		case <-pend[one].wait:
		case <-polls[one].Owner.closing:
		}
		return wokeChanged
	}
	const first = 4 // the cases of the partitions come after these
	cases := make([]reflect.SelectCase, first, first+2*parked)
	cases[0] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}
	cases[1] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(timer)}
	cases[2] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop[0])}
	cases[3] = reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop[1])}
	for i := range polls {
		if live[i] && pend[i].wait != nil {
			cases = append(cases,
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(pend[i].wait)},
				reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(polls[i].Owner.closing)})
		}
	}
	switch chosen, _, _ := reflect.Select(cases); chosen {
	case 0, 2, 3:
		return wokeDone
	case 1:
		return wokeTimer
	}
	return wokeChanged
}
