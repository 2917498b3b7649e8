package main

import (
	"bytes"
	"strings"
	"testing"
)

// execute runs the ledge command tree in-process, as main does, and
// returns what it printed and the error main would exit 1 with.
func execute(args ...string) (string, error) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// A mistyped subcommand fails (a script sees it) and names the command
// meant; it neither prints the group's help nor succeeds.
func TestMistypedSubcommandFailsWithASuggestion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "creat", "demo"}, `ledge topic has no command "creat": did you mean ledge topic create?`},
		{[]string{"plugin", "biuld", "x"}, `ledge plugin has no command "biuld": did you mean ledge plugin build?`},
		{[]string{"serv"}, `ledge has no command "serv": did you mean ledge serve?`},
		{[]string{"token", "crate"}, `did you mean ledge token create?`},
		{[]string{"topic", "frobnicate"}, `ledge topic has no command "frobnicate": ledge topic --help lists them`},
	} {
		out, err := execute(tc.args...)
		if err == nil {
			t.Errorf("ledge %s succeeded, printing:\n%s", strings.Join(tc.args, " "), out)
			continue
		}
		if got := explain(err); !strings.Contains(got, tc.want) {
			t.Errorf("ledge %s: %q, want it to say %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	// A group without a word is a request for its help.
	if out, err := execute("topic"); err != nil || !strings.Contains(out, "Available Commands") {
		t.Errorf("ledge topic: %v\n%s", err, out)
	}
}

// A missing or extra argument is named from the command's usage.
func TestArgumentErrorsNameTheArgument(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"topic", "create"}, "ledge topic create needs TOPIC (usage: ledge topic create TOPIC)"},
		{[]string{"topic", "create", "a", "b"}, "ledge topic create takes TOPIC, got 2 arguments: a b"},
		{[]string{"topic", "list", "x"}, "ledge topic list takes no arguments, got x"},
		{[]string{"group", "set-policy"}, "ledge group set-policy needs GROUP (usage: ledge group set-policy GROUP [POLICY])"},
		{[]string{"state", "get", "g"}, "ledge state get needs TOPIC and PARTITION"},
		{[]string{"uplink", "add"}, "ledge uplink add needs TOPIC (usage: ledge uplink add TOPIC --kafka HOST:PORT --to KAFKA_TOPIC)"},
	} {
		_, err := execute(tc.args...)
		if err == nil {
			t.Errorf("ledge %s succeeded", strings.Join(tc.args, " "))
			continue
		}
		if got := explain(err); got != tc.want && !strings.HasPrefix(got, tc.want) {
			t.Errorf("ledge %s: %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

func TestUsageArgs(t *testing.T) {
	for use, want := range map[string][2]string{
		"create TOPIC":               {"TOPIC", "TOPIC"},
		"list":                       {"", ""},
		"set-policy GROUP [POLICY]":  {"GROUP|[POLICY]", "GROUP"},
		"init NAME --kind a|b --x y": {"NAME", "NAME"},
		"test [DIR | FILE.wasm --input records.jsonl]": {"[DIR | FILE.wasm --input records.jsonl]", ""},
		"add TOPIC --kafka HOST:PORT --to KAFKA_TOPIC": {"TOPIC", "TOPIC"},
		"get GROUP TOPIC PARTITION [KEY]":              {"GROUP|TOPIC|PARTITION|[KEY]", "GROUP|TOPIC|PARTITION"},
		"add NAME FILE.wasm":                           {"NAME|FILE.wasm", "NAME|FILE.wasm"},
	} {
		words, required := usageArgs(use)
		if got := [2]string{strings.Join(words, "|"), strings.Join(required, "|")}; got != want {
			t.Errorf("usageArgs(%q) = %q, want %q", use, got, want)
		}
	}
}
