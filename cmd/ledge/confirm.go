package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// Destructive commands (topic delete, topic purge, group delete) ask
// before they act when a person is at the terminal, as rpk and the nats
// CLI do; --yes answers for them, and a script (standard input not a
// terminal) is not asked.

// addYesFlag registers --yes on a destructive command.
func addYesFlag(cmd *cobra.Command) *bool {
	yes := new(bool)
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "do not ask for confirmation")
	return yes
}

// errNotConfirmed is the answer "no".
var errNotConfirmed = errors.New("nothing was changed: answer y to go ahead, or pass --yes")

// confirm asks question on the terminal unless yes is set or standard
// input is not a terminal, and returns errNotConfirmed unless the answer
// is yes.
func confirm(cmd *cobra.Command, yes bool, question string) error {
	if yes || !stdinIsTerminal(cmd) {
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s [y/N] ", question)
	line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(cmd.ErrOrStderr())
		return errNotConfirmed
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return errNotConfirmed
}

// stdinIsTerminal reports whether the command's input is a terminal. An
// input that says so itself (IsTerminal) is believed: tests use one.
func stdinIsTerminal(cmd *cobra.Command) bool {
	switch in := cmd.InOrStdin().(type) {
	case interface{ IsTerminal() bool }:
		return in.IsTerminal()
	case *os.File:
		return isTerminal(in)
	}
	return false
}
