package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"regexp"
	"strconv"
	"strings"

	"github.com/ledgemq/ledge/sdk"
)

// What the CLI prints when a command fails: one sentence in the CLI's
// words (flags and commands, not SDK options), saying what to do where
// there is something to do. The SDK's and the node's errors say which
// package they come from and repeat what wraps them; a person at a
// terminal needs neither.

// dialError is a failure to reach or authenticate with a node.
type dialError struct {
	addr string
	err  error
}

func (e *dialError) Error() string { return "connect to " + e.addr + ": " + e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// explain returns the sentence the CLI prints for err.
func explain(err error) string {
	var de *dialError
	if errors.As(err, &de) {
		return explainDial(de)
	}
	var se *sdk.Error
	if errors.As(err, &se) {
		return explainNode(se)
	}
	switch {
	case errors.Is(err, sdk.ErrNotNamed):
		return "this needs a named consumer: add --consumer NAME"
	case errors.Is(err, sdk.ErrNoCredentials):
		return noTokenHelp
	}
	return clean(err.Error())
}

const noTokenHelp = "no token to authenticate with: pass --token, --token-file or LEDGE_TOKEN, " +
	"or run beside a node's ledge-data (or name it with --data-dir)"

func explainDial(de *dialError) string {
	err := de.err
	var pathErr *fs.PathError
	var unknownCA x509.UnknownAuthorityError
	var verify *tls.CertificateVerificationError
	var hostname x509.HostnameError
	var unreachable *sdk.DialError
	switch {
	case errors.Is(err, sdk.ErrNoCredentials):
		return noTokenHelp
	case errors.Is(err, sdk.ErrUnauthenticated):
		return fmt.Sprintf("the node at %s refused the token: pass a valid one with --token, --token-file or LEDGE_TOKEN "+
			"(ledge token create makes one)", de.addr)
	case errors.As(err, &hostname):
		return fmt.Sprintf("the certificate of the node at %s does not name that address: connect by a name it lists, "+
			"or restart the node with that address among its certificate's names (ledge serve --help)", de.addr)
	case errors.As(err, &unknownCA), errors.As(err, &verify):
		return fmt.Sprintf("the node at %s has a certificate this CA does not vouch for: pass the node's CA with --ca "+
			"or LEDGE_CA (ca.pem in its ledge-data)", de.addr)
	case errors.As(err, &pathErr) && errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("%s does not exist: check --data-dir, --ca and --token-file (or LEDGE_DATA_DIR, LEDGE_CA, LEDGE_TOKEN_FILE)",
			pathErr.Path)
	case errors.As(err, &unreachable):
		return explainUnreachable(unreachable)
	case isTimeout(err):
		return fmt.Sprintf("no Ledge node answered at %s: is `ledge serve` running?", de.addr)
	}
	return fmt.Sprintf("could not connect to %s: %s", de.addr, clean(err.Error()))
}

// explainUnreachable says which address no node answered at, where the
// CLI took it from, and what to check.
func explainUnreachable(e *sdk.DialError) string {
	what := "no Ledge node answered at " + e.Addr
	if e.NotListening {
		what = "nothing listens at " + e.Addr
	}
	switch e.Source {
	case sdk.AddrGiven:
		return what + " (--server): is `ledge serve` running, and is that its --listen address?"
	case sdk.AddrEnv:
		return what + " (" + envServer + "): is `ledge serve` running, and is " + envServer + " its --listen address?"
	case sdk.AddrListenFile:
		return what + ", where " + e.From + " says its node listens: the node runs but does not answer (still starting, or a firewall?)"
	}
	why := strings.TrimPrefix(e.From, "the default address: ")
	return what + ", the default address (" + why + "): is `ledge serve` running? " +
		"Name its data directory with --data-dir (or " + envDataDir + "), or its address with --server (or " + envServer + ")"
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() // context.DeadlineExceeded too
}

// explainNode explains a request the node refused.
func explainNode(e *sdk.Error) string {
	where := e.Topic
	if e.Topic != "" && e.Partition >= 0 {
		where = fmt.Sprintf("%s/%d", e.Topic, e.Partition)
	}
	msg := clean(e.Message)
	switch {
	case errors.Is(e, sdk.ErrUnknownTopic) && e.Topic != "":
		return fmt.Sprintf("topic %s does not exist: ledge topic list shows the topics, ledge topic create %s makes it", e.Topic, e.Topic)
	case errors.Is(e, sdk.ErrUnknownTopic):
		if name, rest, ok := named(msg, "unknown topic: "); ok && rest == "" {
			return fmt.Sprintf("topic %s does not exist: ledge topic list shows the topics, ledge topic create %s makes it", name, name)
		}
		return fmt.Sprintf("unknown topic %s: ledge topic list shows the topics", strings.TrimPrefix(msg, "unknown topic: "))
	case errors.Is(e, sdk.ErrUnknownPlugin):
		return explainUnknownPlugin(msg)
	case errors.Is(e, sdk.ErrPluginError):
		return explainPluginError(msg, where)
	case errors.Is(e, sdk.ErrPluginTimeout):
		return explainPluginFailure("timed out", msg, where)
	case errors.Is(e, sdk.ErrPluginTrap):
		return explainPluginFailure("trapped", msg, where)
	case errors.Is(e, sdk.ErrPluginInvalidAnswer):
		return explainPluginFailure("answered outside the plugin ABI", msg, where)
	case errors.Is(e, sdk.ErrPluginMemoryLimit):
		return explainPluginFailure("ran out of memory", msg, where)
	case errors.Is(e, sdk.ErrPluginQuarantined):
		return explainQuarantine(msg)
	case errors.Is(e, sdk.ErrUnknownToken):
		if name, rest, ok := named(msg, "unknown token: "); ok && rest == "" {
			return fmt.Sprintf("token %s does not exist: ledge token list shows the tokens' ids", name)
		}
		return fmt.Sprintf("unknown token %s: ledge token list shows the tokens' ids", strings.TrimPrefix(msg, "unknown token: "))
	case errors.Is(e, sdk.ErrTopicExists):
		return fmt.Sprintf("topic %s already exists: ledge topic describe %s shows it", e.Topic, e.Topic)
	case errors.Is(e, sdk.ErrUnknownPartition) && e.Partition >= 0:
		return fmt.Sprintf("topic %s has no partition %d: ledge topic describe %s lists its partitions", e.Topic, e.Partition, e.Topic)
	case errors.Is(e, sdk.ErrUnauthenticated):
		return "the node refused the token: pass a valid one with --token, --token-file or LEDGE_TOKEN"
	case errors.Is(e, sdk.ErrForbidden):
		return "the token may not do this: use a token with the scope it needs (ledge token create --allow)"
	case errors.Is(e, sdk.ErrFencedSession):
		return fmt.Sprintf("another process attached as this consumer on %s, so this one stopped: only one process consumes under a name", where)
	case errors.Is(e, sdk.ErrNotEnoughSpace):
		return fmt.Sprintf("the node's disk is full, nothing was written to %s: free space (ledge topic purge, retention) and retry", where)
	case errors.Is(e, sdk.ErrBusy):
		return "the node is busy (at its bound of requests in flight or parked polls, or past its CPU) and served nothing: retry in a moment"
	case errors.Is(e, sdk.ErrInvalidArgument):
		if msg = strings.TrimPrefix(msg, "invalid argument: "); msg == "" {
			return fmt.Sprintf("the node refused a value of the request (%s)", e.Op)
		}
		if name, rest, ok := named(msg, "unknown group "); ok && rest == "" {
			return unknownGroup(name)
		}
		return msg
	}
	s := e.Status.String()
	if msg != "" && !strings.HasPrefix(msg, s) {
		s += ": " + msg
	} else if msg != "" {
		s = msg
	}
	if where != "" {
		return fmt.Sprintf("%s: %s", where, s)
	}
	return s
}

// unknownGroup is what the CLI says of a group the node does not have,
// whichever command named it.
func unknownGroup(name string) string {
	return fmt.Sprintf("group %s does not exist: ledge group list shows the groups", name)
}

// explainUnknownPlugin explains the node's "unknown plugin: "NAME"...":
// none of that name, or one it could not load (the rest says why).
func explainUnknownPlugin(msg string) string {
	name, rest, ok := named(msg, "unknown plugin: ")
	switch {
	case !ok:
		return msg + ": ledge plugin list shows the plugins"
	case rest == "":
		return fmt.Sprintf("plugin %s does not exist: ledge plugin list shows the plugins, ledge plugin add %s FILE.wasm registers one", name, name)
	}
	return "plugin " + name + rest
}

// missingParam finds the parameter a plugin says is missing, in the words
// the SDK's plugin.Params.Required and the plugin templates use.
var missingParam = regexp.MustCompile(`missing parameter "([^"]+)"`)

// explainPluginError explains an error a plugin reported itself
// ("plugin reported an error: "NAME": FUNCTION: ITS WORDS"), keeping its
// words: a missing parameter is a flag to add.
func explainPluginError(msg, where string) string {
	name, rest, ok := named(msg, "plugin reported an error: ")
	if !ok {
		return msg
	}
	said := strings.TrimPrefix(rest, ": ")
	if m := missingParam.FindStringSubmatch(said); m != nil {
		return fmt.Sprintf("plugin %s needs --param %s=VALUE (it said: %s)", name, m[1], said)
	}
	if where != "" {
		return fmt.Sprintf("plugin %s failed on %s: %s", name, where, said)
	}
	return fmt.Sprintf("plugin %s failed: %s", name, said)
}

// explainPluginFailure explains a plugin's failed call: the host's words
// ("plugin call timed out: "NAME": DETAIL") become the plugin's name,
// what it did and where, then the detail.
func explainPluginFailure(did, msg, where string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return msg
	}
	name, rest, ok := named(msg[i:], "")
	if !ok {
		return msg
	}
	on := ""
	if where != "" {
		on = " on " + where
	}
	if detail, ok := strings.CutPrefix(rest, ": "); ok {
		return fmt.Sprintf("plugin %s %s%s: %s", name, did, on, detail)
	}
	return fmt.Sprintf("plugin %s %s%s: it%s", name, did, on, rest)
}

// explainQuarantine explains "plugin quarantined: "NAME" (WHY); an
// operator clears it ...", naming the command that clears it.
func explainQuarantine(msg string) string {
	name, rest, ok := named(msg, "plugin quarantined: ")
	if !ok {
		return msg
	}
	why, _, _ := strings.Cut(rest, "; ")
	return fmt.Sprintf("plugin %s is quarantined%s: ledge plugin reset %s clears it, as does adding its module again", name, why, name)
}

// named splits the node's `PREFIX"NAME"REST` into NAME and REST; ok is
// false when msg does not read so.
func named(msg, prefix string) (name, rest string, ok bool) {
	s, found := strings.CutPrefix(msg, prefix)
	if !found {
		return "", "", false
	}
	q, err := strconv.QuotedPrefix(s)
	if err != nil {
		return "", "", false
	}
	name, err = strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	return name, s[len(q):], true
}

// packagePrefix is a Go package's name at the start of an error's text.
var packagePrefix = regexp.MustCompile(`(^|: )(sdk|node|owner|group|tokens|pluginreg|uplink|plugins|quic|fence|engine|wire): `)

// clean drops package prefixes from an error's text and the repetitions
// that wrapping leaves ("invalid argument: invalid argument: x").
func clean(s string) string {
	for {
		t := packagePrefix.ReplaceAllString(s, "$1")
		if t == s {
			break
		}
		s = t
	}
	parts := strings.Split(s, ": ")
	out := parts[:0]
	for _, p := range parts {
		if len(out) > 0 && out[len(out)-1] == p {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ": ")
}
