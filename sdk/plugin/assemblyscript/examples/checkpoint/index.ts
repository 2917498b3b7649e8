// checkpoint: a commit policy committing only through the last record of
// a poll marked with the header "header" (default "checkpoint"), and,
// with "value", only when the header has that value; the AssemblyScript
// twin of sdk/plugin/examples/checkpoint. Its field "polls" is state kept
// between the polls of an instance, logged at debug level.

import { Batch, CommitPolicy, LEVEL_DEBUG, Params, Proposal, commitThrough, log, registerCommitPolicy } from "./ledge";
export { ledge_abi_version, ledge_kinds, ledge_buffer, ledge_init, ledge_filter, ledge_propose, ledgeAbort } from "./ledge";

class Checkpoint extends CommitPolicy {
  header: string;
  value: string | null;
  polls: i64 = 0;

  constructor(p: Params) {
    super();
    p.only(["header", "value"]);
    this.header = p.string("header", "checkpoint");
    this.value = p.get("value");
  }

  propose(b: Batch): Proposal {
    this.polls++;
    for (let i = b.length - 1; i >= 0; i--) {
      const r = b.record(i);
      if (!r.hasHeader(this.header)) continue;
      const want = this.value;
      const got = r.headerValue(this.header);
      if (want === null || (got !== null && got == want)) {
        const key = r.keyString();
        log(LEVEL_DEBUG, "poll " + this.polls.toString() + ": commit through " + r.offset.toString() + ", key " + (key === null ? "null" : key));
        return commitThrough(r.offset);
      }
    }
    return new Proposal();
  }
}

registerCommitPolicy((p: Params): CommitPolicy => new Checkpoint(p));
