// ledge.ts: the kit for writing Ledge plugins in AssemblyScript, the
// counterpart of the Go kit (github.com/ledgemq/ledge/sdk/plugin).
// `ledge plugin init` writes it from the ledge binary, so it matches the
// ABI of the node that wrote it (docs/PLUGINS.md, Part 2, version 1).
//
// A plugin registers what it does from top-level code (the module's start
// function, which runs once per instance) and re-exports the ABI's
// functions from its entry file:
//
//   import { Params, Record, RecordFilter, registerRecordFilter } from "./ledge";
//   export { ledge_abi_version, ledge_kinds, ledge_buffer, ledge_init,
//            ledge_filter, ledge_propose, ledge_transform, ledgeAbort } from "./ledge";
//
//   class Hot extends RecordFilter {
//     min: f64;
//     constructor(p: Params) { super(); this.min = p.float("min", 30); }
//     keep(r: Record): bool {
//       const t = r.jsonField("temp");
//       return t !== null && parseFloat(t) > this.min;
//     }
//   }
//   registerRecordFilter((p: Params): RecordFilter => new Hot(p));
//
// Build with asc --runtime incremental --use abort=assembly/ledge/ledgeAbort:
// the node links no "env" module, and ledgeAbort replaces env.abort.
//
// Errors: AssemblyScript has no exceptions a plugin can catch, so a bad
// parameter is reported through Params (required, int, float, bool, only
// and fail record the first error, and ledge_init fails with it), and a
// failing call through Batch.fail. Either fails the poll with the message,
// without a strike against the plugin.
//
// State: a filter or policy object lives as long as its instance, so its
// fields keep what it learns from one poll to the next (a count since the
// last commit, say). The node may run several instances of a plugin and
// close any of them between two polls: keep only what can be lost. A
// transform keeps what must not be lost in its State, which the node
// stores with its outputs.

// ---- The ABI (docs/PLUGINS.md; plugins/abi/layout.go in Ledge) ----

export const ABI_VERSION: i32 = 1;
export const KIND_FILTER: i32 = 1;
export const KIND_COMMIT_POLICY: i32 = 2;
export const KIND_TRANSFORM: i32 = 4;

// Input region header (HEADER_SIZE bytes): field offsets from the
// region's start.
export const INPUT_MAGIC: u32 = 0x3156504c; // "LPV1"
export const HEADER_SIZE: usize = 64;
export const HEADER_MAGIC: usize = 0;
export const HEADER_VERSION: usize = 4;
export const HEADER_REGION_SIZE: usize = 8;
export const HEADER_COUNT: usize = 12;
export const HEADER_FROM: usize = 16;
export const HEADER_NEXT: usize = 24;
export const HEADER_PARTITION: usize = 32;
export const HEADER_TOPIC_OFF: usize = 36;
export const HEADER_TOPIC_LEN: usize = 40;
export const HEADER_RECORDS_OFF: usize = 44;
export const HEADER_HEADERS_OFF: usize = 48;
export const HEADER_HEADER_COUNT: usize = 52;
export const HEADER_ANSWER_OFF: usize = 56;
export const HEADER_ANSWER_CAP: usize = 60;

// Record entry: 40 bytes.
export const RECORD_ENTRY_SIZE: usize = 40;
export const RECORD_OFFSET: usize = 0;
export const RECORD_TIMESTAMP: usize = 8;
export const RECORD_KEY_OFF: usize = 16;
export const RECORD_KEY_LEN: usize = 20;
export const RECORD_VALUE_OFF: usize = 24;
export const RECORD_VALUE_LEN: usize = 28;
export const RECORD_FIRST_HEADER: usize = 32;
export const RECORD_HEADER_COUNT: usize = 36;

// Header entry: 16 bytes.
export const HEADER_ENTRY_SIZE: usize = 16;

// Header entry fields.
export const HEADER_ENTRY_KEY_OFF: usize = 0;
export const HEADER_ENTRY_KEY_LEN: usize = 4;
export const HEADER_ENTRY_VALUE_OFF: usize = 8;
export const HEADER_ENTRY_VALUE_LEN: usize = 12;

// Proposal answer: 16 bytes, decision u32 | 0 u32 | through u64.
// A transform's answer: a header, the outputs, then the new state.
export const TRANSFORM_MAGIC: u32 = 0x3141544c; // "LTA1"
export const TRANSFORM_ANSWER_SIZE: usize = 16;
export const TRANSFORM_COUNT: usize = 4;
export const TRANSFORM_STATE_LEN: usize = 8;
// An output record's entry, followed by its key, value and headers
// (each keyLen u32 | valueLen i32 | key | value).
export const OUTPUT_ENTRY_SIZE: usize = 24;
export const OUTPUT_INPUT: usize = 0;
export const OUTPUT_HEADER_COUNT: usize = 4;
export const OUTPUT_TIMESTAMP: usize = 8;
export const OUTPUT_KEY_LEN: usize = 16;
export const OUTPUT_VALUE_LEN: usize = 20;
// OUTPUT_KEY_LEN or OUTPUT_VALUE_LEN FROM_INPUT: the input's key or value;
// OUTPUT_HEADER_COUNT INPUT_HEADERS: the input's headers. Neither is
// repeated in the answer.
export const FROM_INPUT: i32 = -2;
export const INPUT_HEADERS: u32 = 0xffffffff;

export const PROPOSAL_SIZE: i32 = 16;
export const PROPOSAL_DECISION: usize = 0;
export const PROPOSAL_THROUGH: usize = 8;
export const PROPOSE_NONE: u32 = 0;
export const PROPOSE_COMMIT: u32 = 1;

// Log levels of log().
export const LEVEL_DEBUG: i32 = 0;
export const LEVEL_INFO: i32 = 1;
export const LEVEL_WARN: i32 = 2;
export const LEVEL_ERROR: i32 = 3;

// ---- Host functions (module "ledge") ----

@external("ledge", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;
@external("ledge", "error")
declare function hostError(ptr: usize, len: usize): void;
@external("ledge", "index")
declare function hostIndex(hay: usize, hayLen: usize, needle: usize, needleLen: usize): i32;
@external("ledge", "json_get")
declare function hostJSONGet(doc: usize, docLen: usize, path: usize, pathLen: usize): i64;
@external("ledge", "match_json")
declare function hostMatchJSON(path: usize, pathLen: usize, want: usize, wantLen: usize, bitmap: usize): i32;
@external("ledge", "match_contains")
declare function hostMatchContains(needle: usize, needleLen: usize, bitmap: usize): i32;

// log writes message to the node's log, tagged with the plugin's name.
export function log(level: i32, message: string): void {
  const b = String.UTF8.encode(message);
  hostLog(level, changetype<usize>(b), <usize>b.byteLength);
}

// ---- Parameters ----

// Params are the key=value parameters a consumer gave the plugin. The
// getters that can fail record the first error; ledge_init then fails
// with it.
export class Params {
  keys: string[] = [];
  values: string[] = [];
  error: string | null = null;

  // get returns the value of key, or null when it was not given.
  get(key: string): string | null {
    for (let i = 0; i < this.keys.length; i++) {
      if (this.keys[i] == key) return this.values[i];
    }
    return null;
  }

  has(key: string): bool {
    return this.get(key) !== null;
  }

  // string returns the value of key, or def when it was not given.
  string(key: string, def: string): string {
    const v = this.get(key);
    return v === null ? def : v;
  }

  // required returns the value of key; without it, it records the error
  // `missing parameter "key"` (which `ledge consume` turns into the flag
  // to add) and returns "".
  required(key: string): string {
    const v = this.get(key);
    if (v === null) {
      this.fail('missing parameter "' + key + '"');
      return "";
    }
    return v;
  }

  // int returns the value of key as an integer, or def when it was not
  // given; a value that is not an integer records an error.
  int(key: string, def: i64): i64 {
    const v = this.get(key);
    if (v === null) return def;
    if (!isInteger(v)) {
      this.fail('parameter "' + key + '": "' + v + '" is not an integer');
      return def;
    }
    return I64.parseInt(v, 10);
  }

  // float returns the value of key as a number, or def when it was not
  // given; a value that is not a number records an error.
  float(key: string, def: f64): f64 {
    const v = this.get(key);
    if (v === null) return def;
    const f = parseFloat(v);
    if (v.length == 0 || isNaN(f)) {
      this.fail('parameter "' + key + '": "' + v + '" is not a number');
      return def;
    }
    return f;
  }

  // bool returns the value of key as a boolean (true, false, 1, 0), or
  // def when it was not given.
  bool(key: string, def: bool): bool {
    const v = this.get(key);
    if (v === null) return def;
    if (v == "true" || v == "1" || v == "t" || v == "TRUE" || v == "True") return true;
    if (v == "false" || v == "0" || v == "f" || v == "FALSE" || v == "False") return false;
    this.fail('parameter "' + key + '": "' + v + '" is not a boolean');
    return def;
  }

  // only records an error naming the first parameter not in known, so
  // that a misspelt parameter fails loudly instead of being ignored.
  only(known: string[]): bool {
    for (let i = 0; i < this.keys.length; i++) {
      if (!known.includes(this.keys[i])) {
        this.fail('unknown parameter "' + this.keys[i] + '" (known: ' + known.join(", ") + ")");
        return false;
      }
    }
    return true;
  }

  // fail records an error of the plugin's own (the first one wins).
  fail(message: string): void {
    if (this.error === null) this.error = message;
  }
}

function isInteger(s: string): bool {
  let i = 0;
  if (s.length > 0 && (s.charCodeAt(0) == 45 || s.charCodeAt(0) == 43)) i = 1; // - or +
  if (i == s.length) return false;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

// ---- Records ----

// Header is one header of a record; value is null for a null value.
export class Header {
  constructor(public key: string, public value: string | null) {}
}

// Record is one record of a poll result, read in place from the input
// the host copied into memory. Its getters that return strings or bytes
// copy them; jsonField, contains and the *Ptr/*Len pairs do not.
export class Record {
  constructor(private region: usize, private entry: usize) {}

  // offset is the record's offset in its partition.
  get offset(): u64 {
    return load<u64>(this.entry + RECORD_OFFSET);
  }

  // timestamp is the record's time, unix milliseconds.
  get timestamp(): i64 {
    return load<i64>(this.entry + RECORD_TIMESTAMP);
  }

  // keyPtr and keyLen locate the key in memory (keyLen -1: null key).
  get keyPtr(): usize {
    return this.region + <usize>load<u32>(this.entry + RECORD_KEY_OFF);
  }
  get keyLen(): i32 {
    return load<i32>(this.entry + RECORD_KEY_LEN);
  }

  // valuePtr and valueLen locate the value (valueLen -1: null value).
  get valuePtr(): usize {
    return this.region + <usize>load<u32>(this.entry + RECORD_VALUE_OFF);
  }
  get valueLen(): i32 {
    return load<i32>(this.entry + RECORD_VALUE_LEN);
  }

  // key returns a copy of the key, or null.
  key(): Uint8Array | null {
    return bytesAt(this.keyPtr, this.keyLen);
  }

  // value returns a copy of the value, or null.
  value(): Uint8Array | null {
    return bytesAt(this.valuePtr, this.valueLen);
  }

  // keyString returns the key decoded as UTF-8, or null.
  keyString(): string | null {
    return stringAt(this.keyPtr, this.keyLen);
  }

  // valueString returns the value decoded as UTF-8, or null.
  valueString(): string | null {
    return stringAt(this.valuePtr, this.valueLen);
  }

  // headerCount is the number of the record's headers.
  get headerCount(): i32 {
    return load<i32>(this.entry + RECORD_HEADER_COUNT);
  }

  // header returns header i, 0 <= i < headerCount.
  header(i: i32): Header {
    const h = this.headerEntry(i);
    return new Header(
      stringAt(this.region + <usize>load<u32>(h + HEADER_ENTRY_KEY_OFF), load<i32>(h + HEADER_ENTRY_KEY_LEN))!,
      stringAt(this.region + <usize>load<u32>(h + HEADER_ENTRY_VALUE_OFF), load<i32>(h + HEADER_ENTRY_VALUE_LEN)),
    );
  }

  // headerValue returns the value of the first header called name, or
  // null when there is none or its value is null.
  headerValue(name: string): string | null {
    const h = this.findHeader(name);
    if (h == 0) return null;
    return stringAt(this.region + <usize>load<u32>(h + HEADER_ENTRY_VALUE_OFF), load<i32>(h + HEADER_ENTRY_VALUE_LEN));
  }

  // findHeader returns the address of the entry of the first header
  // called name, or 0.
  private findHeader(name: string): usize {
    const want = utf8(name);
    const wantLen = want.byteLength;
    for (let i = 0; i < this.headerCount; i++) {
      const h = this.headerEntry(i);
      if (load<i32>(h + HEADER_ENTRY_KEY_LEN) == wantLen && memory.compare(this.region + <usize>load<u32>(h + HEADER_ENTRY_KEY_OFF), changetype<usize>(want), <usize>wantLen) == 0) {
        return h;
      }
    }
    return 0;
  }

  // hasHeader reports whether the record has a header called name,
  // whatever its value (null included).
  hasHeader(name: string): bool {
    return this.findHeader(name) != 0;
  }

  // jsonField returns the raw JSON text of the member that path ("a" or
  // "a.b") names in the value, a JSON object, or null. A string's text
  // keeps its quotes: compare with jsonEquals. The host does the lookup.
  jsonField(path: string): string | null {
    if (this.valueLen < 0) return null;
    const p = utf8(path);
    const at = hostJSONGet(this.valuePtr, <usize>this.valueLen, changetype<usize>(p), <usize>p.byteLength);
    if (at < 0) return null;
    return String.UTF8.decodeUnsafe(this.valuePtr + <usize>(at >> 32), <usize>(at & 0xffffffff));
  }

  // jsonEquals reports whether the member at path equals want, as the
  // host's matcher decides: a JSON string when its text is want (escapes
  // other than \" and \\ are not decoded here), any other value when its
  // raw text is want ("42", "true").
  jsonEquals(path: string, want: string): bool {
    const raw = this.jsonField(path);
    if (raw === null) return false;
    if (raw.length >= 2 && raw.charCodeAt(0) == 34) {
      return raw.substring(1, raw.length - 1).replaceAll('\\"', '"').replaceAll("\\\\", "\\") == want;
    }
    return raw == want;
  }

  // contains reports whether the value contains needle. The host searches.
  contains(needle: string): bool {
    if (this.valueLen < 0) return false;
    const n = utf8(needle);
    return hostIndex(this.valuePtr, <usize>this.valueLen, changetype<usize>(n), <usize>n.byteLength) >= 0;
  }

  private headerEntry(i: i32): usize {
    const headers = this.region + <usize>load<u32>(this.region + HEADER_HEADERS_OFF);
    return headers + HEADER_ENTRY_SIZE * <usize>(load<i32>(this.entry + RECORD_FIRST_HEADER) + i);
  }
}

// utf8 returns s encoded as UTF-8. The few strings a plugin passes to the
// host again and again (a path, a needle: fields of its filter) are
// encoded once, remembered by identity.
const utf8Strings: string[] = ["", "", "", "", "", "", "", ""];
const utf8Bytes: ArrayBuffer[] = [
  new ArrayBuffer(0), new ArrayBuffer(0), new ArrayBuffer(0), new ArrayBuffer(0),
  new ArrayBuffer(0), new ArrayBuffer(0), new ArrayBuffer(0), new ArrayBuffer(0),
];
let utf8Next = 0;

function utf8(s: string): ArrayBuffer {
  for (let i = 0; i < utf8Strings.length; i++) {
    if (changetype<usize>(utf8Strings[i]) == changetype<usize>(s)) return utf8Bytes[i];
  }
  const b = String.UTF8.encode(s);
  utf8Strings[utf8Next] = s;
  utf8Bytes[utf8Next] = b;
  utf8Next = (utf8Next + 1) % utf8Strings.length;
  return b;
}

function bytesAt(ptr: usize, len: i32): Uint8Array | null {
  if (len < 0) return null;
  const b = new Uint8Array(len);
  memory.copy(b.dataStart, ptr, <usize>len);
  return b;
}

function stringAt(ptr: usize, len: i32): string | null {
  if (len < 0) return null;
  return String.UTF8.decodeUnsafe(ptr, <usize>len);
}

// Batch is one poll result: the records a consumer would receive, in
// offset order.
export class Batch {
  error: string | null = null;

  constructor(public region: usize) {}

  // length is the number of records, at least 1.
  get length(): i32 {
    return load<i32>(this.region + HEADER_COUNT);
  }

  // record returns record i, 0 <= i < length.
  record(i: i32): Record {
    const records = this.region + <usize>load<u32>(this.region + HEADER_RECORDS_OFF);
    return new Record(this.region, records + RECORD_ENTRY_SIZE * <usize>i);
  }

  // from is the position the poll read from. asc (0.28) fails to parse
  // `x < b.from` ("Identifier expected"): write `b.from > x`.
  get from(): u64 {
    return load<u64>(this.region + HEADER_FROM);
  }

  // next is the position after this result, where the consumer continues
  // whatever a filter keeps.
  get next(): u64 {
    return load<u64>(this.region + HEADER_NEXT);
  }

  get partition(): i32 {
    return load<i32>(this.region + HEADER_PARTITION);
  }

  get topic(): string {
    return String.UTF8.decodeUnsafe(this.region + <usize>load<u32>(this.region + HEADER_TOPIC_OFF), <usize>load<u32>(this.region + HEADER_TOPIC_LEN));
  }

  // answer is the address of the answer area.
  get answer(): usize {
    return this.region + <usize>load<u32>(this.region + HEADER_ANSWER_OFF);
  }

  // fail makes the call fail with message, whatever it answers: the poll
  // fails with it (the first one wins), without a strike.
  fail(message: string): void {
    if (this.error === null) this.error = message;
  }
}

// ---- Answers ----

// Bitmap is a filter's answer, written in place: every record starts
// dropped.
export class Bitmap {
  constructor(public ptr: usize, public length: i32) {}

  keep(i: i32): void {
    const at = this.ptr + (<usize>i >> 3);
    store<u8>(at, load<u8>(at) | (<u8>1 << (<u8>i & 7)));
  }

  drop(i: i32): void {
    const at = this.ptr + (<usize>i >> 3);
    store<u8>(at, load<u8>(at) & ~(<u8>1 << (<u8>i & 7)));
  }

  set(i: i32, kept: bool): void {
    if (kept) this.keep(i);
    else this.drop(i);
  }

  kept(i: i32): bool {
    return ((load<u8>(this.ptr + (<usize>i >> 3)) >> (<u8>i & 7)) & 1) != 0;
  }
}

// Proposal is a commit policy's answer: new Proposal() commits nothing;
// commitThrough(offset) commits through an offset of the batch.
export class Proposal {
  commit: bool = false;
  through: u64 = 0;
}

// commitThrough returns a proposal to commit through offset (the
// committed position becomes offset+1). The offset must lie within what
// the batch delivered, [batch.from, batch.next); the host rejects
// anything else.
export function commitThrough(offset: u64): Proposal {
  const p = new Proposal();
  p.commit = true;
  p.through = offset;
  return p;
}

// ---- Native helpers: the host decides a whole batch in one call ----

// nativeMatchJSON keeps in keep the records whose value is a JSON object
// with the member at path equal to want (as Record.jsonEquals), drops the
// others, and returns how many it kept.
export function nativeMatchJSON(b: Batch, path: string, want: string, keep: Bitmap): i32 {
  const p = utf8(path);
  const w = utf8(want);
  return hostMatchJSON(changetype<usize>(p), <usize>p.byteLength, changetype<usize>(w), <usize>w.byteLength, keep.ptr);
}

// nativeMatchContains keeps in keep the records whose value contains
// needle, drops the others, and returns how many it kept.
export function nativeMatchContains(b: Batch, needle: string, keep: Bitmap): i32 {
  const n = utf8(needle);
  return hostMatchContains(changetype<usize>(n), <usize>n.byteLength, keep.ptr);
}

// ---- What a plugin implements ----

// RecordFilter decides for one record whether the consumer receives it.
export abstract class RecordFilter {
  abstract keep(r: Record): bool;
}

// BatchFilter decides for a whole batch: it keeps records in keep, where
// all start dropped. batch.fail fails the poll.
export abstract class BatchFilter {
  abstract filter(b: Batch, keep: Bitmap): void;
}

// CommitPolicy proposes a commit for a batch the consumer received.
// batch.fail fails the poll.
export abstract class CommitPolicy {
  abstract propose(b: Batch): Proposal;
}

// ---- Transforms ----

// State is a transform's state between batches: bytes the node stores
// with the outputs and hands back with the next batch (empty at first).
// Keep the state here and nowhere else: any instance may serve the next
// batch, and a restart hands back only this.
export class State {
  changed: bool = false;
  next: Uint8Array | null = null;

  constructor(public ptr: usize, public len: i32) {}

  // bytes returns the state (a copy): the previous batch's, or what set
  // gave during this call.
  get bytes(): Uint8Array {
    const n = this.next;
    if (this.changed && n !== null) return n;
    const b = new Uint8Array(this.len);
    memory.copy(b.dataStart, this.ptr, <usize>this.len);
    return b;
  }

  // text returns the state as UTF-8 text.
  get text(): string {
    const b = this.bytes;
    return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.length);
  }

  // set replaces the state the next batch receives. Without it the state
  // stays as it was.
  set(b: Uint8Array): void {
    this.next = b;
    this.changed = true;
  }

  // setText sets the state to the UTF-8 encoding of s.
  setText(s: string): void {
    this.set(Uint8Array.wrap(String.UTF8.encode(s)));
  }
}

// The answer is built outside the collected heap and stays there until
// the next call: the host reads it after ledge_transform returns.
let answerPtr: usize = 0;
let answerCap: usize = 0;
let answerLen: usize = 0;

function reserve(n: usize): usize {
  if (answerLen + n > answerCap) {
    let c = answerCap < 4096 ? <usize>4096 : answerCap * 2;
    while (c < answerLen + n) c *= 2;
    answerPtr = answerPtr == 0 ? heap.alloc(c) : heap.realloc(answerPtr, c);
    answerCap = c;
  }
  const at = answerPtr + answerLen;
  answerLen += n;
  return at;
}

function putSpan(ptr: usize, len: i32): void {
  if (len > 0) memory.copy(reserve(<usize>len), ptr, <usize>len);
}

// Output collects a transform's output records. Outputs follow the
// inputs' order: an output from record i may not come after one from a
// later record (the host refuses the answer).
export class Output {
  count: i32 = 0;

  constructor(public batch: Batch) {}

  // emit outputs a record coming from input record i, with that record's
  // timestamp; a null key or value is null. Strings are written as UTF-8.
  emit(i: i32, key: string | null, value: string | null, headers: Header[] = []): void {
    this.emitAt(i, this.batch.record(i).timestamp, key, value, headers);
  }

  // emitAt is emit with a timestamp of its own (unix milliseconds).
  emitAt(i: i32, timestamp: i64, key: string | null, value: string | null, headers: Header[] = []): void {
    let k: Uint8Array | null = null;
    if (key !== null) k = Uint8Array.wrap(String.UTF8.encode(key));
    let v: Uint8Array | null = null;
    if (value !== null) v = Uint8Array.wrap(String.UTF8.encode(value));
    this.emitBytes(i, timestamp, k, v, headers);
  }

  // emitBytes outputs a record of raw bytes.
  emitBytes(i: i32, timestamp: i64, key: Uint8Array | null, value: Uint8Array | null, headers: Header[] = []): void {
    let kp: usize = 0;
    let kl: i32 = -1;
    if (key !== null) {
      kp = key.dataStart;
      kl = key.length;
    }
    let vp: usize = 0;
    let vl: i32 = -1;
    if (value !== null) {
      vp = value.dataStart;
      vl = value.length;
    }
    this.entry(i, timestamp, headers.length, kp, kl, vp, vl);
    for (let j = 0; j < headers.length; j++) {
      const h = headers[j];
      const hk = String.UTF8.encode(h.key);
      const hv = h.value;
      const at = reserve(8);
      store<u32>(at, <u32>hk.byteLength);
      if (hv === null) {
        store<i32>(at + 4, -1);
        putSpan(changetype<usize>(hk), hk.byteLength);
      } else {
        const hvb = String.UTF8.encode(hv);
        store<i32>(at + 4, hvb.byteLength);
        putSpan(changetype<usize>(hk), hk.byteLength);
        putSpan(changetype<usize>(hvb), hvb.byteLength);
      }
    }
  }

  // pass outputs input record i unchanged: its timestamp, key, value and
  // headers, which the host takes from the input as it gave it (nothing
  // is copied; a change made to the input in place is not seen).
  pass(i: i32): void {
    this.entry(i, this.batch.record(i).timestamp, <i32>INPUT_HEADERS, 0, FROM_INPUT, 0, FROM_INPUT);
  }

  private entry(i: i32, timestamp: i64, headerCount: i32, keyPtr: usize, keyLen: i32, valuePtr: usize, valueLen: i32): void {
    const at = reserve(OUTPUT_ENTRY_SIZE);
    store<i32>(at + OUTPUT_INPUT, i);
    store<i32>(at + OUTPUT_HEADER_COUNT, headerCount);
    store<i64>(at + OUTPUT_TIMESTAMP, timestamp);
    store<i32>(at + OUTPUT_KEY_LEN, keyLen);
    store<i32>(at + OUTPUT_VALUE_LEN, valueLen);
    putSpan(keyPtr, keyLen);
    putSpan(valuePtr, valueLen);
    this.count++;
  }
}

// Transform turns a batch of records into output records: zero or more
// per input, in input order, emitted into out; s is the state between
// batches. batch.fail fails the batch (the node retries it with the same
// state).
export abstract class Transform {
  abstract transform(b: Batch, s: State, out: Output): void;
}

let transformSetup: ((p: Params) => Transform) | null = null;
let transformer: Transform | null = null;

// registerTransform registers the plugin's transform. setup runs once per
// instance with the transform's parameters. A plugin registers at most
// one transform.
export function registerTransform(setup: (p: Params) => Transform): void {
  assert(transformSetup === null, "a transform is already registered");
  transformSetup = setup;
}

let recordFilterSetup: ((p: Params) => RecordFilter) | null = null;
let batchFilterSetup: ((p: Params) => BatchFilter) | null = null;
let commitPolicySetup: ((p: Params) => CommitPolicy) | null = null;
let recordFilter: RecordFilter | null = null;
let batchFilter: BatchFilter | null = null;
let commitPolicy: CommitPolicy | null = null;

// registerRecordFilter registers the plugin's filter as a function of
// one record. setup runs once per instance with the consumer's
// parameters. A plugin registers at most one filter.
export function registerRecordFilter(setup: (p: Params) => RecordFilter): void {
  assert(recordFilterSetup === null && batchFilterSetup === null, "a filter is already registered");
  recordFilterSetup = setup;
}

// registerBatchFilter registers the plugin's filter as a function of the
// whole batch. See registerRecordFilter.
export function registerBatchFilter(setup: (p: Params) => BatchFilter): void {
  assert(recordFilterSetup === null && batchFilterSetup === null, "a filter is already registered");
  batchFilterSetup = setup;
}

// registerCommitPolicy registers the plugin's commit policy. A plugin
// registers at most one policy (and may also register a filter).
export function registerCommitPolicy(setup: (p: Params) => CommitPolicy): void {
  assert(commitPolicySetup === null, "a commit policy is already registered");
  commitPolicySetup = setup;
}

// ---- The exports of the ABI: re-export them from the entry file ----

let buffer: usize = 0;
let bufferSize: usize = 0;

export function ledge_abi_version(): i32 {
  return ABI_VERSION;
}

export function ledge_kinds(): i32 {
  let k = 0;
  if (recordFilterSetup !== null || batchFilterSetup !== null) k |= KIND_FILTER;
  if (commitPolicySetup !== null) k |= KIND_COMMIT_POLICY;
  if (transformSetup !== null) k |= KIND_TRANSFORM;
  return k;
}

// ledge_buffer lends the host size bytes, outside the collected heap.
// When memory cannot grow, heap.alloc aborts, which ends the call as a
// trap.
export function ledge_buffer(size: usize): usize {
  if (size > bufferSize) {
    buffer = buffer == 0 ? heap.alloc(size) : heap.realloc(buffer, size);
    bufferSize = size;
  }
  return buffer;
}

function fail(message: string): i32 {
  const b = String.UTF8.encode(message);
  hostError(changetype<usize>(b), <usize>b.byteLength);
  return -1;
}

// ledge_init reads the parameters (count u32, then count times keyLen
// u32 | key | valueLen u32 | value) and sets the registered kind up.
export function ledge_init(kind: i32, ptr: usize, len: usize): i32 {
  const p = new Params();
  const count = load<u32>(ptr);
  let at = ptr + 4;
  for (let i: u32 = 0; i < count; i++) {
    const keyLen = <usize>load<u32>(at);
    p.keys.push(String.UTF8.decodeUnsafe(at + 4, keyLen));
    const valueLen = <usize>load<u32>(at + 4 + keyLen);
    p.values.push(String.UTF8.decodeUnsafe(at + 8 + keyLen, valueLen));
    at += 8 + keyLen + valueLen;
  }
  if (kind == KIND_FILTER) {
    const r = recordFilterSetup;
    const b = batchFilterSetup;
    if (r !== null) recordFilter = r(p);
    else if (b !== null) batchFilter = b(p);
    else return fail("this plugin is not a filter");
  } else if (kind == KIND_COMMIT_POLICY) {
    const c = commitPolicySetup;
    if (c === null) return fail("this plugin is not a commit policy");
    commitPolicy = c(p);
  } else if (kind == KIND_TRANSFORM) {
    const t = transformSetup;
    if (t === null) return fail("this plugin is not a transform");
    transformer = t(p);
  } else {
    return fail("unknown call kind " + kind.toString());
  }
  const err = p.error;
  if (err !== null) return fail(err);
  return 0;
}

// ledge_filter answers with a bitmap of the records to keep.
export function ledge_filter(ptr: usize, len: usize): i32 {
  const b = new Batch(ptr);
  const n = b.length;
  const keep = new Bitmap(b.answer, n);
  const r = recordFilter;
  const bf = batchFilter;
  if (r !== null) {
    for (let i = 0; i < n; i++) {
      if (r.keep(b.record(i))) keep.keep(i);
    }
  } else if (bf !== null) {
    bf.filter(b, keep);
  } else {
    return fail("the filter was not set up");
  }
  const err = b.error;
  if (err !== null) return fail(err);
  // Bits past the last record must be zero.
  if (n & 7) store<u8>(keep.ptr + (<usize>n >> 3), load<u8>(keep.ptr + (<usize>n >> 3)) & ((<u8>1 << (<u8>n & 7)) - 1));
  return (n + 7) >> 3;
}

// ledge_propose answers with a proposal (PROPOSAL_SIZE bytes).
export function ledge_propose(ptr: usize, len: usize): i32 {
  const b = new Batch(ptr);
  const c = commitPolicy;
  if (c === null) return fail("the commit policy was not set up");
  const p = c.propose(b);
  const err = b.error;
  if (err !== null) return fail(err);
  const answer = b.answer;
  memory.fill(answer, 0, <usize>PROPOSAL_SIZE);
  if (p.commit) {
    store<u32>(answer + PROPOSAL_DECISION, PROPOSE_COMMIT);
    store<u64>(answer + PROPOSAL_THROUGH, p.through);
  }
  return PROPOSAL_SIZE;
}

// ledge_transform answers with the outputs and the new state, built
// outside the collected heap, and returns the answer's address << 32 | its
// size.
export function ledge_transform(ptr: usize, len: usize, state: usize, stateLen: usize): i64 {
  const b = new Batch(ptr);
  const t = transformer;
  if (t === null) return <i64>fail("the transform was not set up");
  answerLen = 0;
  reserve(TRANSFORM_ANSWER_SIZE);
  const out = new Output(b);
  const s = new State(state, <i32>stateLen);
  t.transform(b, s, out);
  const err = b.error;
  if (err !== null) return <i64>fail(err);
  let n: usize = stateLen;
  const next = s.next;
  if (s.changed && next !== null) {
    n = <usize>next.length;
    putSpan(next.dataStart, next.length);
  } else {
    putSpan(state, <i32>stateLen);
  }
  store<u32>(answerPtr, TRANSFORM_MAGIC);
  store<u32>(answerPtr + TRANSFORM_COUNT, <u32>out.count);
  store<u32>(answerPtr + TRANSFORM_STATE_LEN, <u32>n);
  store<u32>(answerPtr + 12, 0);
  return (<i64>answerPtr << 32) | <i64>answerLen;
}

// ledgeAbort replaces AssemblyScript's env.abort import (the node links
// no "env" module): it logs the message and traps. asc's
// --use abort=assembly/ledge/ledgeAbort names it.
export function ledgeAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (message !== null) log(LEVEL_ERROR, message);
  unreachable();
}
