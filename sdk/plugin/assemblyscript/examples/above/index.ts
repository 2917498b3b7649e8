// above: a filter keeping the readings whose JSON member at "field" is a
// number above "min" (and, with "unit", whose member "unit" is that text),
// decided per record with the kit's typed records, beyond what the host's
// matchers do. Parameters: field (default "temp"), min, unit (optional).

import { Params, Record, RecordFilter, registerRecordFilter } from "./ledge";
export { ledge_abi_version, ledge_kinds, ledge_buffer, ledge_init, ledge_filter, ledge_propose, ledgeAbort } from "./ledge";

class Above extends RecordFilter {
  field: string;
  min: f64;
  unit: string | null;

  constructor(p: Params) {
    super();
    p.only(["field", "min", "unit"]);
    this.field = p.string("field", "temp");
    this.min = p.float("min", 0);
    if (!p.has("min")) p.fail('missing parameter "min"');
    this.unit = p.get("unit");
  }

  keep(r: Record): bool {
    const raw = r.jsonField(this.field);
    if (raw === null || raw.startsWith('"')) return false; // absent, or not a number
    const unit = this.unit;
    if (unit !== null && !r.jsonEquals("unit", unit)) return false;
    return parseFloat(raw) > this.min;
  }
}

registerRecordFilter((p: Params): RecordFilter => new Above(p));
