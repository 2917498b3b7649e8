// tally: a transform counting the records of each key across batches, its
// counts kept in the transform's state (text, "key=count" lines), so that
// they survive from one batch to the next whichever instance runs it. For
// each record it outputs the key's running count, "<key>: <n>", with the
// header "count"; a record whose value is "skip" outputs nothing, one
// whose value is "twice" outputs an extra copy of itself one millisecond
// later, as raw bytes.

import { Batch, Header, Output, Params, State, Transform, registerTransform } from "./ledge";
export { ledge_abi_version, ledge_kinds, ledge_buffer, ledge_init, ledge_transform, ledgeAbort } from "./ledge";

class Tally extends Transform {
  constructor(p: Params) {
    super();
    p.only([]);
  }

  transform(b: Batch, s: State, out: Output): void {
    const keys = new Array<string>();
    const counts = new Array<i32>();
    const text = s.text;
    if (text.length > 0) {
      const lines = text.split("\n");
      for (let i = 0; i < lines.length; i++) {
        const at = lines[i].lastIndexOf("=");
        keys.push(lines[i].substring(0, at));
        counts.push(I32.parseInt(lines[i].substring(at + 1)));
      }
    }
    for (let i = 0; i < b.length; i++) {
      const r = b.record(i);
      const v = r.valueString();
      if (v !== null && v == "skip") continue;
      const k = r.keyString();
      const key = k === null ? "" : k;
      let j = keys.indexOf(key);
      if (j < 0) {
        j = keys.length;
        keys.push(key);
        counts.push(0);
      }
      counts[j] = counts[j] + 1;
      const n = counts[j].toString();
      out.emit(i, k, key + ": " + n, [new Header("count", n)]);
      if (v !== null && v == "twice") {
        const raw = new Uint8Array(r.valueLen);
        memory.copy(raw.dataStart, r.valuePtr, <usize>r.valueLen);
        out.emitBytes(i, r.timestamp + 1, null, raw);
      }
    }
    let next = "";
    for (let j = 0; j < keys.length; j++) {
      if (j > 0) next += "\n";
      next += keys[j] + "=" + counts[j].toString();
    }
    s.setText(next);
  }
}

registerTransform((p: Params): Transform => new Tally(p));
