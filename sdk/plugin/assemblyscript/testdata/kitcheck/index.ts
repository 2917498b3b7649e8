// kitcheck: a module that calls every function of the AssemblyScript kit
// (asc compiles only what is used), run by cmd/ledge's tests on
// records.jsonl. The filter keeps the records that pass every check of
// verdict; a mismatch between the host's matchers and the kit's own reads
// fails the call, naming it.

import {
  Batch, BatchFilter, Bitmap, CommitPolicy, LEVEL_DEBUG, Params, Proposal, Record,
  commitThrough, log, nativeMatchContains, nativeMatchJSON, registerBatchFilter, registerCommitPolicy,
} from "./ledge";
export { ledge_abi_version, ledge_kinds, ledge_buffer, ledge_init, ledge_filter, ledge_propose, ledgeAbort } from "./ledge";

class Check extends BatchFilter {
  n: i64;
  x: f64;
  flag: bool;
  site: string;
  calls: i32 = 0;

  constructor(p: Params) {
    super();
    p.only(["n", "x", "flag", "site"]);
    this.n = p.int("n", 0);
    this.x = p.float("x", 0);
    this.flag = p.bool("flag", false);
    this.site = p.required("site");
    if (p.get("absent") !== null || p.has("absent") || !p.has("n") || p.string("absent", "def") != "def") p.fail("get, has or string");
    if (this.n != 7 || this.x != 2.5 || !this.flag) p.fail("int, float or bool read " + this.n.toString() + ", " + this.x.toString());
  }

  filter(b: Batch, keep: Bitmap): void {
    this.calls++;
    log(LEVEL_DEBUG, "call " + this.calls.toString() + " on " + b.topic + "/" + b.partition.toString());
    if (b.from > b.record(0).offset || b.next <= b.record(b.length - 1).offset) b.fail("from or next");
    nativeMatchContains(b, this.site, keep);
    for (let i = 0; i < b.length; i++) {
      if (keep.kept(i) != b.record(i).contains(this.site)) b.fail("contains disagrees on record " + i.toString());
    }
    nativeMatchJSON(b, "site", this.site, keep);
    for (let i = 0; i < b.length; i++) {
      if (keep.kept(i) != b.record(i).jsonEquals("site", this.site)) b.fail("jsonEquals disagrees on record " + i.toString());
    }
    for (let i = 0; i < b.length; i++) {
      keep.set(i, this.verdict(b.record(i)));
    }
  }

  verdict(r: Record): bool {
    const key = r.key();
    const value = r.value();
    const ks = r.keyString();
    const vs = r.valueString();
    if (key === null || value === null || ks === null || vs === null) return false;
    if (ks != "k" || key.length != r.keyLen || value.length != r.valueLen || r.keyPtr == 0 || r.valuePtr == 0) return false;
    if (r.timestamp != 1700000000000) return false;
    if (r.headerCount != 2 || r.header(0).key != "h" || r.header(0).value! != "v" || r.header(1).value !== null) return false;
    if (r.headerValue("h") != "v" || !r.hasHeader("n") || r.headerValue("n") !== null || r.hasHeader("absent")) return false;
    const site = r.jsonField("site");
    return site !== null && site == '"' + this.site + '"';
  }
}

class LastKept extends CommitPolicy {
  propose(b: Batch): Proposal {
    const r = b.record(b.length - 1);
    if (b.from > r.offset) return new Proposal();
    return commitThrough(r.offset);
  }
}

registerBatchFilter((p: Params): BatchFilter => new Check(p));
registerCommitPolicy((p: Params): CommitPolicy => new LastKept());
