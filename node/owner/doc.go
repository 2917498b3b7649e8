// Package owner holds the partition owner and the registries it consults:
// the producers (idempotent producer ids and epochs) and the sessions of
// named consumers.
//
// The partition owner (Owner) is the single place where a partition's
// history and its consumers' progress change. It hands package fence the
// facts and applies fence's decisions; it orders effects under its lock and
// waits for their durability outside it (Durable). See docs/FENCING.md.
//
// A poll that names a key (PollRequest.Key, the commands of one device)
// parks in the owner's key index rather than on the partition's change
// signal: an append wakes only the polls of the keys it holds, so a
// device's parked poll costs the same whether one or ten thousand share
// the partition (KeyPolls counts them and their wake-ups).
//
// An owner reaches its storage through two interfaces, PartitionLog and
// Metadata; EngineLog and NewEngineMetadata adapt the storage engine to
// them, and tests use in-memory fakes. It learns about group members
// through the Members interface, which the group coordinator implements:
// this package never imports the coordinator, the network or plugins.
package owner
