// Package transform runs a node's transforms: a transform NAME reads a
// topic, calls a transform plugin on each batch of input with the state it
// answered last, and appends the outputs to another topic, exactly once
// through crashes, power loss (with the output topic's durability
// "always"), plugin failures and restarts (docs/PIPELINES.md).
//
// A transform is a member of an internal consumer group,
// "__transform.NAME", of the node's coordinator (node/group): the
// partitions of its input topic are assigned to it by the group's rules,
// and each partition it holds gets a runner. A runner's reads, state and
// offset commits are a group member's, fenced by the partition's owner
// with the member and assignment epochs like any member's; its appends
// are an idempotent producer's, one per input partition
// ("__transform.NAME/P"), re-initialized (a new epoch) whenever a runner
// takes the partition, so that an earlier runner's late append is
// refused by the output partition's owner.
//
// A step of a runner:
//
//  1. poll the input from the committed offset (whole stored batches);
//  2. call the plugin with the state of the previous step: outputs and a
//     new state;
//  3. if there are outputs, write them as pending — the input range, the
//     producer epoch and the sequences of the one output batch, and the
//     new state — in the group's fenced state, at the committed offset
//     (the input does not move), and wait until that is durable;
//  4. append the output batch, idempotently, and wait until it is durable;
//  5. promote: the next write of the partition moves the committed offset
//     past the input and makes the new state current (a step without
//     outputs does this at once, with no pending).
//
// A runner taking a partition (at a start, after a failure, when the
// partition moves) first re-initializes the producer, then reads the
// committed state: a pending step whose batch the output partition's
// producer state holds landed and is promoted; one whose batch is not
// there never will be (its epoch is fenced), so it is dropped and the
// input processed again. Every output is therefore appended once, and
// the state and the input offset always describe exactly what was
// appended. The outputs of input partition P go to output partition
// P mod n (n the output topic's partitions), in input order.
//
// The package serves no request: node/session's handlers, the node's
// status and its metrics read what Manager.List and Manager.Status
// report.
package transform
