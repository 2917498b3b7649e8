package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// Source says where a key's effective value came from.
type Source uint8

// Sources, from the weakest to the strongest.
const (
	SourceDefault Source = iota
	SourceFile
	SourceEnv
	SourceFlag
)

func (s Source) String() string {
	switch s {
	case SourceFile:
		return "file"
	case SourceEnv:
		return "environment"
	case SourceFlag:
		return "flag"
	}
	return "default"
}

// ConfigEnv names the configuration file when --config is not given.
const ConfigEnv = "LEDGE_CONFIG"

// ErrInvalid is matched (errors.Is) by every error Load returns for a bad
// setting. Not retryable: fix the value the error names.
var ErrInvalid = errors.New("config: invalid configuration")

// Error is a setting refused by Load: the key, where the value came from,
// the value, and what is allowed.
type Error struct {
	Key    string // the key's file name (quic.max_conns)
	Source Source
	// Origin names the source for people: "flag --quic-max-conns",
	// "LEDGE_QUIC_MAX_CONNS", "ledge.yaml".
	Origin string
	Value  string
	// Want says what is allowed; Problem replaces the "want" sentence for
	// errors that are not about the value (an unknown key).
	Want    string
	Problem string
}

func (e *Error) Error() string {
	if e.Problem != "" {
		return fmt.Sprintf("config: %s (from %s): %s", e.Key, e.Origin, e.Problem)
	}
	return fmt.Sprintf("config: %s = %q (from %s): want %s", e.Key, e.Value, e.Origin, e.Want)
}

// Is makes every *Error match ErrInvalid.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Loader reads the configuration of one command: the flags it registered,
// the environment and the file.
type Loader struct {
	flags       *pflag.FlagSet
	values      map[string]*flagValue
	file        string
	printConfig bool
}

// Register adds a flag for every key to fs, plus --config (the YAML file)
// and --print-config, and returns the Loader that reads them.
func Register(fs *pflag.FlagSet) *Loader {
	l := &Loader{flags: fs, values: map[string]*flagValue{}}
	for _, k := range Keys() {
		v := &flagValue{key: k, text: k.Default}
		usage := fmt.Sprintf("%s (%s; env %s)", k.Help, k.Allowed, k.Env())
		f := fs.VarPF(v, k.Flag(), "", usage)
		if k.Kind == KindBool {
			f.NoOptDefVal = "true"
		}
		l.values[k.Name] = v
	}
	fs.StringVar(&l.file, "config", "", "YAML configuration file; flags and LEDGE_* variables override it (env "+ConfigEnv+")")
	fs.BoolVar(&l.printConfig, "print-config", false, "print the effective configuration, with where each value came from, and exit")
	return l
}

// PrintRequested reports whether --print-config was given.
func (l *Loader) PrintRequested() bool { return l.printConfig }

// flagValue is a key's flag: it keeps the text as given; Load checks it,
// so that a bad flag is reported like any other bad value.
type flagValue struct {
	key  Key
	text string
	list []string
	set  bool
}

func (v *flagValue) String() string {
	if v.key.Kind == KindList {
		return "[" + strings.Join(v.list, ",") + "]"
	}
	return v.text
}

func (v *flagValue) Set(s string) error {
	if v.key.Kind == KindList {
		if !v.set {
			v.list = nil
		}
		v.list = append(v.list, splitList(s)...)
	}
	v.text, v.set = s, true
	return nil
}

func (v *flagValue) Type() string {
	switch v.key.Kind {
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindBytes:
		return "bytes"
	case KindDuration:
		return "duration"
	case KindList:
		return "strings"
	}
	return "string"
}

// Load returns the effective configuration: defaults, overridden by the
// file (--config, else $LEDGE_CONFIG), by the environment (lookupEnv,
// usually os.LookupEnv; an empty variable counts as unset), then by the
// flags given. Every bad value is reported, each as an *Error, joined.
func (l *Loader) Load(lookupEnv func(string) (string, bool)) (*Config, error) {
	c := Defaults()
	var errs []error
	file := l.file
	if file == "" && lookupEnv != nil {
		file, _ = lookupEnv(ConfigEnv)
	}
	if file != "" {
		c.File = file
		vals, err := readFile(file)
		if err != nil {
			return nil, err
		}
		for _, fv := range vals {
			k, ok := KeyByName(fv.key)
			if !ok {
				errs = append(errs, &Error{Key: fv.key, Source: SourceFile, Origin: file, Problem: unknownKey(fv.key)})
				continue
			}
			errs = append(errs, c.apply(k, fv.value, SourceFile, file))
		}
	}
	for _, k := range Keys() {
		if lookupEnv == nil {
			break
		}
		if s, ok := lookupEnv(k.Env()); ok && s != "" {
			errs = append(errs, c.apply(k, rawValue{text: s}, SourceEnv, k.Env()))
		}
	}
	for _, k := range Keys() {
		if v := l.values[k.Name]; v != nil && v.set {
			raw := rawValue{text: v.text}
			if k.Kind == KindList {
				raw = rawValue{list: v.list, isList: true}
			}
			errs = append(errs, c.apply(k, raw, SourceFlag, "flag --"+k.Flag()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	c.sizeFromMemory(c.nodeMemory())
	return c, nil
}

// Defaults returns the configuration with every key at its default.
func Defaults() *Config {
	c := &Config{sources: map[string]Source{}, origins: map[string]string{}}
	for _, k := range Keys() {
		if err := k.set(c, rawValue{text: k.Default}); err != nil {
			panic(fmt.Sprintf("config: default of %s: %v", k.Name, err)) // a bug in the key table
		}
		c.sources[k.Name], c.origins[k.Name] = SourceDefault, "default"
	}
	return c
}

// apply sets one key from one source.
func (c *Config) apply(k Key, v rawValue, src Source, origin string) error {
	if err := k.set(c, v); err != nil {
		return &Error{Key: k.Name, Source: src, Origin: origin, Value: v.String(), Want: err.Error()}
	}
	c.sources[k.Name], c.origins[k.Name] = src, origin
	return nil
}

// check applies the rules that tie keys together.
func (c *Config) check() error {
	if c.QUIC.InflightBudget < c.QUIC.MaxFrameSize {
		return &Error{
			Key: "quic.inflight_budget", Source: c.Source("quic.inflight_budget"), Origin: c.origins["quic.inflight_budget"],
			Value: formatBytes(c.QUIC.InflightBudget),
			Want:  fmt.Sprintf("at least quic.max_frame_size (%s), or a largest request could never be read", formatBytes(c.QUIC.MaxFrameSize)),
		}
	}
	return nil
}

// Source returns where the key's effective value came from.
func (c *Config) Source(key string) Source { return c.sources[key] }

// unknownKey says a file key is unknown, suggesting the nearest known one.
func unknownKey(name string) string {
	best, bestDist := "", 4
	for _, k := range Keys() {
		if d := editDistance(name, k.Name); d < bestDist {
			best, bestDist = k.Name, d
		}
	}
	if best != "" {
		return fmt.Sprintf("unknown key (did you mean %s?)", best)
	}
	return "unknown key (ledge serve --print-config lists every key)"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// fileValue is one key of the file, in file order.
type fileValue struct {
	key   string
	value rawValue
}

// maxFileSize bounds the configuration file: it is a few kilobytes.
const maxFileSize = 1 << 20

// readFile reads a YAML file of nested mappings into dotted keys.
func readFile(path string) ([]fileValue, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: reading %s: %w", path, err)
	}
	if len(b) > maxFileSize {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrInvalid, path, maxFileSize)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil // an empty file
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%w: %s: want a mapping of keys at the top level", ErrInvalid, path)
	}
	var out []fileValue
	if err := walk(root, "", &out, map[string]bool{}); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, path, err)
	}
	return out, nil
}

func walk(n *yaml.Node, prefix string, out *[]fileValue, seen map[string]bool) error {
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := kn.Value
		if prefix != "" {
			name = prefix + "." + name
		}
		if vn.Kind != yaml.MappingNode {
			if seen[name] {
				return fmt.Errorf("line %d: %s is set twice", kn.Line, name)
			}
			seen[name] = true
		}
		switch vn.Kind {
		case yaml.MappingNode:
			if err := walk(vn, name, out, seen); err != nil {
				return err
			}
		case yaml.SequenceNode:
			v := rawValue{isList: true, list: []string{}}
			for _, item := range vn.Content {
				if item.Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: %s: want a list of plain values", item.Line, name)
				}
				v.list = append(v.list, item.Value)
			}
			*out = append(*out, fileValue{name, v})
		case yaml.ScalarNode:
			*out = append(*out, fileValue{name, rawValue{text: vn.Value}})
		default:
			return fmt.Errorf("line %d: %s: want a value, a list or a mapping", vn.Line, name)
		}
	}
	return nil
}
