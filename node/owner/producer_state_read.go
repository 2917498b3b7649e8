package owner

import "github.com/ledgemq/ledge/fence"

// ProducerState returns producer id's state on the partition — its epoch
// and its latest batches, including batches appended but not durable yet —
// as of an append step: every append whose producer check passed before
// the call is in it, and every later append is checked against the
// node-wide registration as it is then. A caller that re-initialized id
// first therefore sees every batch of the earlier incarnations that will
// ever be appended. ok is false when id never appended here. d is the
// durability of the newest batch: wait for it before acting on that
// batch being there.
func (o *Owner) ProducerState(id fence.ProducerID) (s fence.ProducerState, ok bool, d Durable) {
	o.appendMu.Lock()
	defer o.appendMu.Unlock()
	s, ok = o.log.ProducerState(id)
	if ok && s.Len() > 0 {
		d = LogDurable(o.log, s.Batch(0).Last)
	}
	return s, ok, d
}
