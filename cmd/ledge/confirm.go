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
// CLI do; --yes answers for them. With standard input not a terminal (a
// script, a pipe, /dev/null) there is no one to ask: they do nothing
// without --yes, and say so.

// addYesFlag registers --yes on a destructive command.
func addYesFlag(cmd *cobra.Command) *bool {
	yes := new(bool)
	cmd.Flags().BoolVarP(yes, "yes", "y", false, "do not ask for confirmation (needed when standard input is not a terminal)")
	return yes
}

// errNotConfirmed is the answer "no".
var errNotConfirmed = errors.New("nothing was changed: answer y to go ahead, or pass --yes")

// errNoTerminal is a destructive command run without a terminal to ask
// on and without --yes.
var errNoTerminal = errors.New("nothing was changed: standard input is not a terminal to ask on, pass --yes to go ahead")

// confirm asks question on the terminal unless yes is set, and returns
// errNotConfirmed unless the answer is yes; with standard input not a
// terminal it asks nothing and returns errNoTerminal.
func confirm(cmd *cobra.Command, yes bool, question string) error {
	if yes {
		return nil
	}
	if !stdinIsTerminal(cmd) {
		return errNoTerminal
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
