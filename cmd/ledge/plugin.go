package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ledgemq/ledge/plugins"
	"github.com/ledgemq/ledge/record"
)

// newPluginCommand is "ledge plugin": registering plugins on a node (add,
// list, remove, reset: plugin_admin.go), and running them locally, under the
// node's production limits, without a node (test, bench).
func newPluginCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Work with WebAssembly plugins (filters, commit policies and transforms)",
		Example: `  ledge plugin init only-errors --kind filter --lang go
  ledge plugin build only-errors
  ledge plugin test only-errors
  ledge plugin add only-errors only-errors/only-errors.wasm --kind filter
  ledge plugin bench jsonfilter.wasm --param field=site --param equals=lyon`,
	}
	cmd.AddCommand(newPluginInitCommand(), newPluginBuildCommand(), newPluginTestCommand(), newPluginBenchCommand(),
		newPluginAddCommand(), newPluginListCommand(), newPluginRemoveCommand(), newPluginResetCommand())
	return cmd
}

// pluginFlags are the flags test and bench share.
type pluginFlags struct {
	kind     string
	params   []string
	cacheDir string
}

func (f *pluginFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.kind, "kind", "", "plugin kind: filter, commit-policy or transform (default: what the module implements, filter first)")
	cmd.Flags().StringArrayVar(&f.params, "param", nil, "plugin parameter key=value (repeatable)")
	cmd.Flags().StringVar(&f.cacheDir, "cache-dir", defaultPluginCacheDir(), "compilation cache directory (empty: none)")
}

func defaultPluginCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "ledge", "wazero")
	}
	return ""
}

// project resolves a project directory (from ledge plugin init) to its
// built module, and takes its kind, its sample records (when input is
// empty) and its parameters, each --param overriding the one of its
// name. Anything but a directory is returned as is.
func (f *pluginFlags) project(file string, input *string) (string, error) {
	if st, err := os.Stat(file); err != nil || !st.IsDir() {
		return file, nil
	}
	p, err := loadProject(file)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p.wasmPath()); err != nil {
		return "", fmt.Errorf("%s is not built yet: run ledge plugin build %s", p.wasmPath(), p.dir)
	}
	if *input == "" {
		*input = p.inputPath()
	}
	if f.kind == "" {
		f.kind = p.Kind
	}
	params := maps.Clone(p.Params)
	if params == nil {
		params = map[string]string{}
	}
	for _, kv := range f.params {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", fmt.Errorf("--param %q: want key=value", kv)
		}
		params[k] = v
	}
	f.params = f.params[:0]
	for _, k := range slices.Sorted(maps.Keys(params)) {
		f.params = append(f.params, k+"="+params[k])
	}
	return p.wasmPath(), nil
}

// load starts a host with the production limits and adds the module.
func (f *pluginFlags) load(ctx context.Context, cmd *cobra.Command, file string) (*plugins.Host, plugins.Kind, plugins.Params, error) {
	params, err := plugins.ParseParams(f.params)
	if err != nil {
		return nil, 0, nil, err
	}
	wasm, err := os.ReadFile(file)
	if err != nil {
		return nil, 0, nil, err
	}
	logger := slog.New(pluginOutputHandler{slog.NewTextHandler(cmd.ErrOrStderr(), nil)})
	h, err := plugins.NewHost(ctx, plugins.Config{CacheDir: f.cacheDir, Logger: logger})
	if err != nil {
		return nil, 0, nil, err
	}
	kinds := []plugins.Kind{plugins.KindFilter, plugins.KindCommitPolicy, plugins.KindTransform}
	if f.kind != "" {
		k, err := plugins.ParseKind(f.kind)
		if err != nil {
			h.Close(ctx)
			return nil, 0, nil, err
		}
		kinds = []plugins.Kind{k}
	}
	for i, k := range kinds {
		_, err = h.Add(ctx, "plugin", k, wasm)
		if err == nil {
			return h, k, params, nil
		}
		if !errors.Is(err, plugins.ErrWrongKind) || i == len(kinds)-1 {
			break
		}
	}
	h.Close(ctx)
	return nil, 0, nil, err
}

func newPluginTestCommand() *cobra.Command {
	var f pluginFlags
	var input string
	var batch int
	cmd := &cobra.Command{
		Use:   "test [DIR | FILE.wasm --input records.jsonl]",
		Short: "Run a plugin over records under production limits and print its decisions",
		Long: `Run a plugin over the records of a JSON Lines file, with the limits a node
applies (deadline, memory cap, metering), and print what it decides: for a
filter, which records a consumer would receive; for a commit policy, the
commit it proposes; for a transform, the records it outputs (its state
carried from poll to poll, as a node does).

With a project directory (from ledge plugin init; default: the current
directory), it runs the project's built module on its sample records with
its parameters; --input and --kind override them, and each --param
overrides the parameter of its name.

Each input line is an object:

  {"offset": 10, "timestamp": 1700000000000, "key": "k1",
   "value": {"site": "lyon"}, "headers": {"checkpoint": "yes"},
   "expect": "keep"}

Every field is optional. offset defaults to the previous one plus one
(0 first); timestamp is unix milliseconds. key and value: a string is
taken as its text, any other JSON value as its JSON text, null or absent
as null; key_base64 and value_base64 give raw bytes. headers map names to
strings (null: a null value). expect is what the plugin must decide: for
a filter "keep" or "drop"; for a commit policy "commit" marks the record
a poll's proposal must commit through (a poll with records but no mark
must propose nothing).

For a transform, "outputs" lists the records it must output for that
input record, in order ([] for none):

  {"key": "k1", "value": {"temp": 21}, "outputs": [
     {"key": "k1", "value": {"celsius": 21}, "headers": {"unit": "C"}}]}

Each output takes key, value, key_base64, value_base64 and headers as an
input record does (a JSON value is compared as JSON), and timestamp when
it must be checked. Once any record lists outputs, every record is
checked, a record without "outputs" expecting none. The test fails when a
decision or an output differs.`,
		Example: `  ledge plugin test only-errors
  ledge plugin test jsonfilter.wasm --input readings.jsonl --param field=site --param equals=lyon
  ledge plugin test checkpoint.wasm --kind commit-policy --input records.jsonl
  ledge plugin test perminute.wasm --kind transform --input readings.jsonl --batch 100`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "."
			if len(args) == 1 {
				file = args[0]
			}
			file, err := f.project(file, &input)
			if err != nil {
				return err
			}
			if input == "" {
				return errors.New("--input is required with a .wasm file: name a JSON Lines file of records")
			}
			smp, err := readSamplesFile(input)
			if err != nil {
				return err
			}
			recs, expects := smp.recs, smp.expects
			if len(recs) == 0 {
				return fmt.Errorf("%s has no records", input)
			}
			ctx := cmd.Context()
			h, kind, params, err := f.load(ctx, cmd, file)
			if err != nil {
				return err
			}
			defer h.Close(ctx)
			out := cmd.OutOrStdout()
			if batch <= 0 {
				batch = len(recs)
			}
			checked, wrong := 0, 0
			var state []byte // a transform's, from poll to poll
			for start := 0; start < len(recs); start += batch {
				end := min(start+batch, len(recs))
				poll, want := recs[start:end], expects[start:end]
				v, err := viewOfRecords(poll)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "poll [%d, %d): %s\n", v.From(), v.Next(), plural(v.Len(), "record"))
				if kind == plugins.KindTransform {
					res, err := h.Transform(ctx, "plugin", params, v, state)
					if err != nil {
						return err
					}
					state = res.State
					var wantOuts [][]expectedOutput
					if smp.outputs != nil {
						wantOuts = smp.outputs[start:end]
					}
					c, w := printTransform(out, v, poll, res, wantOuts)
					checked, wrong = checked+c, wrong+w
					fmt.Fprintf(out, "  %s in, %d out; the state is %s\n", plural(len(poll), "record"), len(res.Outputs), plural(len(state), "byte"))
				} else if kind == plugins.KindFilter {
					keep, err := h.Filter(ctx, "plugin", params, v)
					if err != nil {
						return err
					}
					for i, r := range poll {
						verdict := "drop"
						if keep.Kept(i) {
							verdict = "keep"
						}
						note := ""
						if want[i] != "" {
							checked++
							if want[i] != verdict {
								wrong++
								note = "   <- expected " + want[i]
							}
						}
						fmt.Fprintf(out, "  %s %d %s%s\n", verdict, r.Offset, preview(r.Value), note)
					}
					fmt.Fprintf(out, "  kept %d of %d; the consumer continues at %d\n", keep.Count(), v.Len(), v.Next())
				} else {
					p, err := h.Propose(ctx, "plugin", params, v)
					if err != nil {
						return err
					}
					if p.Commit {
						fmt.Fprintf(out, "  proposal: commit through %d (committed position %d)\n", p.Through, p.Position())
					} else {
						fmt.Fprintln(out, "  proposal: none (the committed position does not move)")
					}
					if slices.ContainsFunc(expects, func(e string) bool { return e != "" }) {
						checked++
						mark := slices.Index(want, "commit")
						if (mark < 0 && p.Commit) || (mark >= 0 && (!p.Commit || p.Through != poll[mark].Offset)) {
							wrong++
							if mark < 0 {
								fmt.Fprintln(out, "  <- expected no proposal")
							} else {
								fmt.Fprintf(out, "  <- expected commit through %d\n", poll[mark].Offset)
							}
						}
					}
				}
			}
			st, _ := h.Stat("plugin")
			fmt.Fprintf(out, "%s: %s, %v per call on average, %d KiB of memory\n",
				kind, plural(int(st.Stats.Calls), "call"), meanCall(st.Stats), st.Stats.MaxMemoryPages*64)
			if checked > 0 {
				what := plural(checked, "verdict")
				switch kind {
				case plugins.KindCommitPolicy:
					what = plural(checked, "proposal")
				case plugins.KindTransform:
					what = "the outputs of " + plural(checked, "record")
				}
				if wrong > 0 {
					return fmt.Errorf("%d of %s differ from what %s expects (marked above)", wrong, what, input)
				}
				fmt.Fprintf(out, "ok: %s as %s expects\n", what, input)
			}
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&input, "input", "", "JSON Lines file of records (required with a .wasm file)")
	cmd.Flags().IntVar(&batch, "batch", 0, "records per poll (default: all in one poll)")
	return cmd
}

func newPluginBenchCommand() *cobra.Command {
	var f pluginFlags
	var input string
	var records, size int
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "bench [DIR | FILE.wasm]",
		Short: "Measure a plugin's throughput: records per second and time per call",
		Long: `Call a plugin repeatedly, under production limits, on polls of --records
records, and print records per second and the time per call. The records
come from --input (repeated as needed) or are generated: JSON objects of
--size bytes, half of them with "site":"lyon".

With a project directory (from ledge plugin init; default: the current
directory), it runs the project's built module on its sample records with
its parameters, as ledge plugin test does; --input, --kind and --param
override them.`,
		Example: `  ledge plugin bench only-errors
  ledge plugin bench jsonfilter.wasm --param field=site --param equals=lyon
  ledge plugin bench sample.wasm --param rate=0.1 --records 5000 --duration 5s`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := "."
			if len(args) == 1 {
				file = args[0]
			}
			file, err := f.project(file, &input)
			if err != nil {
				return err
			}
			var recs []record.Record
			if input != "" {
				if recs, err = readRecordsFile(input); err != nil {
					return err
				}
				if len(recs) == 0 {
					return fmt.Errorf("%s: no records", input)
				}
			} else {
				recs = syntheticRecords(records, size)
			}
			for len(recs) < records {
				recs = append(recs, recs[:min(len(recs), records-len(recs))]...)
			}
			recs = recs[:records]
			for i := range recs {
				recs[i].Offset = uint64(i)
			}
			ctx := cmd.Context()
			h, kind, params, err := f.load(ctx, cmd, file)
			if err != nil {
				return err
			}
			defer h.Close(ctx)
			v, err := viewOfRecords(recs)
			if err != nil {
				return err
			}
			var state []byte // a transform's, carried from call to call
			call := func() error {
				switch kind {
				case plugins.KindFilter:
					_, err := h.Filter(ctx, "plugin", params, v)
					return err
				case plugins.KindTransform:
					res, err := h.Transform(ctx, "plugin", params, v, state)
					state = res.State
					return err
				}
				_, err := h.Propose(ctx, "plugin", params, v)
				return err
			}
			if err := call(); err != nil { // warm up: start and initialize an instance
				return err
			}
			var times []time.Duration
			start := time.Now()
			for time.Since(start) < duration {
				t0 := time.Now()
				if err := call(); err != nil {
					return err
				}
				times = append(times, time.Since(t0))
			}
			total := time.Since(start)
			slices.Sort(times)
			pct := func(p float64) time.Duration { return times[min(len(times)-1, int(float64(len(times))*p))] }
			st, _ := h.Stat("plugin")
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "%s, %s of %s per call, %s in %v\n", kind, plural(len(recs), "record"), formatBytes(int64(avgValue(recs))), plural(len(times), "call"), total.Round(time.Millisecond))
			fmt.Fprintf(out, "  %.0f records/s\n", float64(len(times)*len(recs))/total.Seconds())
			fmt.Fprintf(out, "  time per call: p50 %v, p99 %v, max %v\n", pct(0.5), pct(0.99), times[len(times)-1])
			fmt.Fprintf(out, "  per record: %.0f ns\n", float64(total.Nanoseconds())/float64(len(times)*len(recs)))
			if kind == plugins.KindFilter && st.Stats.RecordsIn > 0 {
				fmt.Fprintf(out, "  kept %.1f%% of records\n", 100*float64(st.Stats.RecordsOut)/float64(st.Stats.RecordsIn))
			}
			if kind == plugins.KindTransform && st.Stats.RecordsIn > 0 {
				fmt.Fprintf(out, "  %.2f output records per input record; state %s\n",
					float64(st.Stats.RecordsOut)/float64(st.Stats.RecordsIn), plural(len(state), "byte"))
			}
			fmt.Fprintf(out, "  instance memory: %d KiB\n", st.Stats.MaxMemoryPages*64)
			return nil
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&input, "input", "", "JSON Lines file of records (see ledge plugin test --help); default: generated")
	cmd.Flags().IntVar(&records, "records", 1000, "records per call")
	cmd.Flags().IntVar(&size, "size", 100, "value size in bytes of generated records")
	cmd.Flags().DurationVar(&duration, "duration", 2*time.Second, "how long to measure")
	return cmd
}

// printTransform prints a transform's outputs under the input records
// they come from and checks them against want (nil: nothing to check). It
// returns the records checked and those whose outputs differ.
func printTransform(out io.Writer, v *plugins.View, poll []record.Record, res plugins.TransformResult, want [][]expectedOutput) (checked, wrong int) {
	next := 0
	for i, r := range poll {
		var got []plugins.Output
		for next < len(res.Outputs) && res.Outputs[next].Input == i {
			got = append(got, res.Outputs[next])
			next++
		}
		note := ""
		if want != nil {
			checked++
			ok := len(got) == len(want[i])
			for j := 0; ok && j < len(got); j++ {
				ok = want[i][j].matches(got[j], v.OutputHeaders(got[j]))
			}
			if !ok {
				wrong++
				note = fmt.Sprintf("   <- expected %s", plural(len(want[i]), "output"))
				if len(want[i]) == len(got) {
					note = "   <- expected other outputs"
				}
			}
		}
		fmt.Fprintf(out, "  %d %s -> %s%s\n", r.Offset, preview(r.Value), plural(len(got), "output"), note)
		for _, o := range got {
			fmt.Fprintf(out, "      key %s value %s", preview(o.Key), preview(o.Value))
			for _, h := range v.OutputHeaders(o) {
				fmt.Fprintf(out, " [%s=%s]", strings.ToValidUTF8(string(h.Key), "?"), preview(h.Value))
			}
			if o.Timestamp != r.Timestamp {
				fmt.Fprintf(out, " at %d", o.Timestamp)
			}
			fmt.Fprintln(out)
		}
		if note != "" && len(want[i]) > 0 {
			for _, w := range want[i] {
				fmt.Fprintf(out, "      expected: key %s value %s\n", preview(w.rec.Key), preview(w.rec.Value))
			}
		}
	}
	return checked, wrong
}

// jsonRecord is one line of a records file.
type jsonRecord struct {
	Offset      *uint64            `json:"offset"`
	Timestamp   int64              `json:"timestamp"`
	Key         json.RawMessage    `json:"key"`
	Value       json.RawMessage    `json:"value"`
	KeyBase64   *string            `json:"key_base64"`
	ValueBase64 *string            `json:"value_base64"`
	Headers     map[string]*string `json:"headers"`
	Expect      string             `json:"expect"`
	Outputs     *[]jsonOutput      `json:"outputs"`
}

// jsonOutput is a record a transform must output, in a records file.
type jsonOutput struct {
	Timestamp   *int64             `json:"timestamp"`
	Key         json.RawMessage    `json:"key"`
	Value       json.RawMessage    `json:"value"`
	KeyBase64   *string            `json:"key_base64"`
	ValueBase64 *string            `json:"value_base64"`
	Headers     map[string]*string `json:"headers"`
}

// samples are the records of a records file and what each must give.
type samples struct {
	recs    []record.Record
	expects []string // a filter's or a policy's verdict; "" when none
	// outputs are the records a transform must output for each record;
	// nil when the file lists none for any record (then none is checked).
	outputs [][]expectedOutput
}

// expectedOutput is an output record a records file expects.
type expectedOutput struct {
	rec    record.Record
	anyTS  bool // no timestamp given: any is right
	isJSON [2]bool
}

func readRecordsFile(path string) ([]record.Record, error) {
	s, err := readSamplesFile(path)
	return s.recs, err
}

// readSamplesFile reads a records file with what each record must give.
func readSamplesFile(path string) (samples, error) {
	f, err := os.Open(path)
	if err != nil {
		return samples{}, err
	}
	defer f.Close()
	s, err := readSamples(f)
	if err != nil {
		return samples{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// readRecords parses JSON Lines records (see ledge plugin test --help).
func readRecords(r io.Reader) ([]record.Record, error) {
	s, err := readSamples(r)
	return s.recs, err
}

func readSamples(r io.Reader) (samples, error) {
	recs, expects, outputs, err := readRecordsExpect(r)
	return samples{recs: recs, expects: expects, outputs: outputs}, err
}

func readRecordsExpect(r io.Reader) ([]record.Record, []string, [][]expectedOutput, error) {
	var expects []string
	var outputs [][]expectedOutput
	anyOutputs := false
	var out []record.Record
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), record.BatchMaxSize)
	next := uint64(0)
	for line := 1; sc.Scan(); line++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		var jr jsonRecord
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&jr); err != nil {
			return nil, nil, nil, fmt.Errorf("line %d: %w", line, err)
		}
		rec := record.Record{Offset: next, Timestamp: jr.Timestamp}
		if jr.Offset != nil {
			if len(out) > 0 && *jr.Offset <= out[len(out)-1].Offset {
				return nil, nil, nil, fmt.Errorf("line %d: offset %d does not follow %d", line, *jr.Offset, out[len(out)-1].Offset)
			}
			rec.Offset = *jr.Offset
		}
		var err error
		if rec.Key, err = recordBytes(jr.Key, jr.KeyBase64); err != nil {
			return nil, nil, nil, fmt.Errorf("line %d: key: %w", line, err)
		}
		if rec.Value, err = recordBytes(jr.Value, jr.ValueBase64); err != nil {
			return nil, nil, nil, fmt.Errorf("line %d: value: %w", line, err)
		}
		names := make([]string, 0, len(jr.Headers))
		for k := range jr.Headers {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			h := record.Header{Key: k}
			if v := jr.Headers[k]; v != nil {
				h.Value = []byte(*v)
			}
			rec.Headers = append(rec.Headers, h)
		}
		var outs []expectedOutput
		if jr.Outputs != nil {
			anyOutputs = true
			outs = []expectedOutput{}
			for j, jo := range *jr.Outputs {
				o, err := jo.expected()
				if err != nil {
					return nil, nil, nil, fmt.Errorf("line %d: output %d: %w", line, j, err)
				}
				outs = append(outs, o)
			}
		}
		switch jr.Expect {
		case "", "keep", "drop", "commit":
		default:
			return nil, nil, nil, fmt.Errorf("line %d: expect %q: use keep or drop (a filter), or commit (a commit policy); a transform's are \"outputs\"", line, jr.Expect)
		}
		out = append(out, rec)
		expects = append(expects, jr.Expect)
		outputs = append(outputs, outs)
		next = rec.Offset + 1
	}
	if !anyOutputs {
		outputs = nil
	} else {
		for i := range outputs {
			if outputs[i] == nil {
				outputs[i] = []expectedOutput{} // none listed: none expected
			}
		}
	}
	return out, expects, outputs, sc.Err()
}

func (jo jsonOutput) expected() (expectedOutput, error) {
	var o expectedOutput
	var err error
	if o.rec.Key, err = recordBytes(jo.Key, jo.KeyBase64); err != nil {
		return o, fmt.Errorf("key: %w", err)
	}
	if o.rec.Value, err = recordBytes(jo.Value, jo.ValueBase64); err != nil {
		return o, fmt.Errorf("value: %w", err)
	}
	o.isJSON = [2]bool{isJSONText(jo.Key), isJSONText(jo.Value)}
	if jo.Timestamp != nil {
		o.rec.Timestamp = *jo.Timestamp
	} else {
		o.anyTS = true
	}
	for _, k := range slices.Sorted(maps.Keys(jo.Headers)) {
		h := record.Header{Key: k}
		if v := jo.Headers[k]; v != nil {
			h.Value = []byte(*v)
		}
		o.rec.Headers = append(o.rec.Headers, h)
	}
	return o, nil
}

// isJSONText reports whether a key or value field is a JSON value other
// than a string or null: its text is compared as JSON.
func isJSONText(raw json.RawMessage) bool {
	return len(raw) > 0 && raw[0] != '"' && string(raw) != "null"
}

// matches reports whether a transform's output, with headers hs, is the
// expected record: the same key, value (a JSON value in the file compared
// as compact JSON), headers (in any order), and timestamp when the file
// gives one.
func (e expectedOutput) matches(o plugins.Output, hs []plugins.OutHeader) bool {
	same := func(want, got []byte, asJSON bool) bool {
		if (want == nil) != (got == nil) {
			return false
		}
		if bytes.Equal(want, got) {
			return true
		}
		if !asJSON {
			return false
		}
		var a, b bytes.Buffer
		return json.Compact(&a, want) == nil && json.Compact(&b, got) == nil && bytes.Equal(a.Bytes(), b.Bytes())
	}
	if !same(e.rec.Key, o.Key, e.isJSON[0]) || !same(e.rec.Value, o.Value, e.isJSON[1]) ||
		(!e.anyTS && e.rec.Timestamp != o.Timestamp) || len(e.rec.Headers) != len(hs) {
		return false
	}
	got := slices.Clone(hs)
	slices.SortStableFunc(got, func(a, b plugins.OutHeader) int { return bytes.Compare(a.Key, b.Key) })
	for i, h := range e.rec.Headers {
		if h.Key != string(got[i].Key) || !same(h.Value, got[i].Value, false) {
			return false
		}
	}
	return true
}

// recordBytes turns a key or value field into bytes: a JSON string's text,
// another JSON value's text, base64, or nil (null).
func recordBytes(raw json.RawMessage, b64 *string) ([]byte, error) {
	if b64 != nil {
		if len(raw) > 0 {
			return nil, errors.New("both the field and its _base64 form are given")
		}
		return base64.StdEncoding.DecodeString(*b64)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []byte(s), nil
	}
	return []byte(raw), nil
}

// viewOfRecords builds a poll result holding recs, with their offsets.
func viewOfRecords(recs []record.Record) (*plugins.View, error) {
	var b record.BatchBuilder
	var batches [][]byte
	for i, r := range recs {
		if b.Len() > 0 && (b.Size() > 1<<20 || r.Offset-recs[i-1].Offset > 1<<31) {
			batch, err := b.Build(record.CompressionNone)
			if err != nil {
				return nil, err
			}
			batches = append(batches, batch)
			b.Reset()
		}
		b.AppendWithOffset(r)
	}
	batch, err := b.Build(record.CompressionNone)
	if err != nil {
		return nil, err
	}
	batches = append(batches, batch)
	return plugins.NewView(plugins.PollResult{
		Topic: "test", From: recs[0].Offset, Next: recs[len(recs)-1].Offset + 1, Batches: batches,
	})
}

// syntheticRecords returns n JSON records of about size bytes, half of
// them with "site":"lyon".
func syntheticRecords(n, size int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		site := "lyon"
		if i%2 == 1 {
			site = "oslo"
		}
		v := fmt.Sprintf(`{"site":"%s","device":"sensor-%06d","temp":%d.%d,"pad":"`, site, i, 10+i%20, i%10)
		if pad := size - len(v) - 2; pad > 0 {
			v += strings.Repeat("x", pad)
		}
		recs[i] = record.Record{Offset: uint64(i), Timestamp: int64(i), Value: []byte(v + `"}`)}
	}
	return recs
}

func avgValue(recs []record.Record) int {
	n := 0
	for _, r := range recs {
		n += len(r.Value)
	}
	return n / len(recs)
}

func meanCall(s plugins.Stats) time.Duration {
	if s.Calls == 0 {
		return 0
	}
	return (s.CallTime / time.Duration(s.Calls)).Round(time.Microsecond)
}

// preview shows the start of a value on one line.
func preview(v []byte) string {
	if v == nil {
		return "(null)"
	}
	const max = 60
	s := strings.ToValidUTF8(string(v[:min(len(v), max)]), "?")
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(v) > max {
		s += "..."
	}
	return s
}

// pluginOutputHandler shows what a plugin logs and the host's warnings,
// not the host's routine events.
type pluginOutputHandler struct{ slog.Handler }

func (h pluginOutputHandler) Handle(ctx context.Context, r slog.Record) error {
	fromPlugin := false
	r.Attrs(func(a slog.Attr) bool {
		fromPlugin = fromPlugin || a.Key == "source"
		return !fromPlugin
	})
	if !fromPlugin && r.Level < slog.LevelWarn {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h pluginOutputHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return pluginOutputHandler{h.Handler.WithAttrs(as)}
}

func (h pluginOutputHandler) WithGroup(name string) slog.Handler {
	return pluginOutputHandler{h.Handler.WithGroup(name)}
}
