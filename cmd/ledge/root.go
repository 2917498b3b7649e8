package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version and commit are set at link time:
//
//	go build -ldflags "-X main.version=v0.1.0 -X main.commit=$(git rev-parse HEAD)" ./cmd/ledge
//
// When they are not set, the build information embedded by the Go toolchain
// fills them in where it can.
var (
	version = "dev"
	commit  = ""
)

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "ledge",
		Short:         "Ledge: a WebAssembly-pluggable message node for the edge",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newVersionCommand())
	root.AddCommand(newPluginCommand())
	root.AddCommand(newServeCommand())
	root.AddCommand(newStatusCommand())
	root.AddCommand(newTopicCommand())
	root.AddCommand(newProduceCommand())
	root.AddCommand(newConsumeCommand())
	root.AddCommand(newTokenCommand())
	root.AddCommand(newBenchCommand())
	root.AddCommand(newGroupCommand())
	root.AddCommand(newUplinkCommand())
	root.AddCommand(newDownlinkCommand())
	root.AddCommand(newTransformCommand())
	root.AddCommand(newStateCommand())
	strictArgs(root)
	return root
}

// strictArgs makes every command of the tree say what is wrong with its
// arguments, by name, and fail: a command that only groups others (ledge
// topic, ledge plugin) fails on a word that is none of them, with the
// closest as a suggestion, rather than printing its help and succeeding;
// a missing or extra argument is named from the command's usage ("ledge
// topic create needs TOPIC") rather than counted.
func strictArgs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		strictArgs(c)
	}
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		cmd.Args = cobra.ArbitraryArgs
		cmd.SuggestionsMinimumDistance = 2 // "biuld" is "build"
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return unknownCommand(c, args[0])
		}
		return
	}
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return argsError(c, args)
			}
			return nil
		}
	}
}

// unknownCommand is the error of a group command given a word that is
// none of its subcommands.
func unknownCommand(c *cobra.Command, word string) error {
	path := c.CommandPath()
	if s := c.SuggestionsFor(word); len(s) > 0 {
		for i := range s {
			s[i] = path + " " + s[i]
		}
		return fmt.Errorf("%s has no command %q: did you mean %s? (%s --help lists them)", path, word, strings.Join(s, " or "), path)
	}
	return fmt.Errorf("%s has no command %q: %s --help lists them", path, word, path)
}

// argsError says what a command's arguments lack or have too many of,
// in the words of its usage line.
func argsError(c *cobra.Command, args []string) error {
	words, required := usageArgs(c.Use)
	path := c.CommandPath()
	usage := path
	if fields := strings.Fields(c.Use); len(fields) > 1 {
		usage += " " + strings.Join(fields[1:], " ") // with the flags it shows
	}
	switch {
	case len(words) == 0:
		return fmt.Errorf("%s takes no arguments, got %s", path, quoteWords(args))
	case len(args) < len(required):
		return fmt.Errorf("%s needs %s (usage: %s)", path, strings.Join(required[len(args):], " and "), usage)
	}
	return fmt.Errorf("%s takes %s, got %s: %s (quote an argument that holds spaces)", path, strings.Join(words, " "),
		plural(len(args), "argument"), quoteWords(args))
}

// usageArgs returns the positional arguments of a usage line ("create
// TOPIC", "set-policy GROUP [POLICY]", "init NAME --kind K"): all of
// them, optional ones in brackets, and the required ones. Flags and
// their values are left out.
func usageArgs(use string) (words, required []string) {
	fields := strings.Fields(use)
	depth, flagValue := 0, false
	var group []string
	for _, w := range fields[min(1, len(fields)):] {
		switch {
		case depth == 0 && strings.HasPrefix(w, "-"):
			flagValue = !strings.Contains(w, "=")
			continue
		case depth == 0 && flagValue:
			flagValue = false
			continue
		}
		depth += strings.Count(w, "[") - strings.Count(w, "]")
		group = append(group, w)
		if depth > 0 {
			continue
		}
		word := strings.Join(group, " ")
		group = group[:0]
		words = append(words, word)
		if !strings.HasPrefix(word, "[") {
			required = append(required, word)
		}
	}
	if len(group) > 0 {
		words = append(words, strings.Join(group, " "))
	}
	return words, required
}

// quoteWords spells arguments as a shell would need them.
func quoteWords(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit and Go version of this binary",
		Example: "  ledge version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, c := buildVersion()
			fmt.Fprintf(cmd.OutOrStdout(), "ledge %s (commit %s, %s %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}

// buildVersion returns the version and commit of this binary, preferring the
// values set at link time and falling back to the toolchain's build info.
func buildVersion() (ver, rev string) {
	ver, rev = version, commit
	info, ok := debug.ReadBuildInfo()
	if !ok {
		if rev == "" {
			rev = "unknown"
		}
		return ver, rev
	}
	if ver == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		ver = info.Main.Version
	}
	if rev == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return ver, rev
}
