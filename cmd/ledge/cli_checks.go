package main

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/ledgemq/ledge/sdk"
)

// checkSASLFlags refuses SASL flags that cannot work together, before the
// node tries (and fails reading a password file named "").
func checkSASLFlags(mechanism, user, passwordFile string) error {
	switch {
	case mechanism == "" && (user != "" || passwordFile != ""):
		return errors.New("--sasl-user and --sasl-password-file need --sasl-mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)")
	case mechanism != "" && user == "":
		return fmt.Errorf("--sasl-mechanism %s needs --sasl-user", mechanism)
	case mechanism != "" && passwordFile == "":
		return errors.New("--sasl-user needs --sasl-password-file: a file on the node holding the password (it is not taken on the command line)")
	}
	return nil
}

// groupExists tells a group that does not exist from one that is merely
// empty: the node describes any name as an empty group.
func groupExists(ctx context.Context, c *sdk.Client, d sdk.GroupDescription) error {
	if d.Epoch != 0 || len(d.Members) > 0 || len(d.Offsets) > 0 || d.Policy != "" {
		return nil
	}
	groups, err := c.ListGroups(ctx)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(groups, func(g sdk.GroupSummary) bool { return g.Name == d.Name }) {
		return nil
	}
	return errors.New(unknownGroup(d.Name))
}
