// Package fence holds Ledge's fencing rules: the identities that say which
// world a piece of work was created in (topic id, history epoch, producer
// id and epoch, consumer session epoch, group member and assignment
// epochs), the Token that poll results, commits and state writes carry, and
// one check per kind of effect.
//
// The package is pure, in the spirit of etcd's raft core: no I/O, no
// goroutines, no clock. The partition owner hands it facts — the
// partition's current state, what it knows of the consumer or producer, the
// token a piece of work carries — and it returns a decision. The owner
// alone applies decisions. Every rule of docs/FENCING.md lives here once;
// a check written anywhere else is a bug.
//
// The accepting path of every check does not allocate. A rejection is an
// *Error whose Code is stable on the wire and whose Action tells the client
// what to do: retry, refresh its position, re-initialize, rejoin its group,
// or give up. Use errors.Is with the Err sentinels, and Retryable.
//
// What this package is not: it stores nothing and persists nothing. The
// counters behind the epochs live with the owner, which persists them
// before handing their values out.
package fence
