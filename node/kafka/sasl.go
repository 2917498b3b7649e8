package kafka

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// mechPlain is the one SASL mechanism: PLAIN, whose password is a Ledge
// token's secret (the user name is not checked; it names the client in
// logs).
const mechPlain = "PLAIN"

func (cc *conn) saslHandshake(m *kmsg.SASLHandshakeRequest) kmsg.Response {
	r := m.ResponseKind().(*kmsg.SASLHandshakeResponse)
	r.SupportedMechanisms = []string{mechPlain}
	if m.Mechanism != mechPlain {
		r.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return r
	}
	cc.mech = mechPlain
	// Version 0: the SASL exchange follows as raw frames, without a
	// Kafka request around them (rawSASL).
	cc.rawSASL = m.Version == 0
	return r
}

// rawSASL serves a SASL/PLAIN exchange that follows a SaslHandshake v0:
// the frame holds the mechanism's bytes alone; success is an empty frame,
// failure closes the connection.
func (cc *conn) rawSASLAuthenticate(body []byte) bool {
	cc.rawSASL = false
	r := cc.saslAuthenticate(&kmsg.SASLAuthenticateRequest{SASLAuthBytes: body})
	return r.ErrorCode == 0
}

func (cc *conn) saslAuthenticate(m *kmsg.SASLAuthenticateRequest) *kmsg.SASLAuthenticateResponse {
	r := m.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	fail := func(msg string) *kmsg.SASLAuthenticateResponse {
		r.ErrorCode = kerr.SaslAuthenticationFailed.Code
		r.ErrorMessage = &msg
		cc.s.log.Info("kafka: authentication refused", "remote", cc.remote(), "reason", msg)
		return r
	}
	if cc.mech != mechPlain {
		r.ErrorCode = kerr.IllegalSaslState.Code
		return r
	}
	cc.mech = ""
	// PLAIN: authzid NUL authcid NUL password.
	parts := bytes.Split(m.SASLAuthBytes, []byte{0})
	if len(parts) != 3 {
		return fail("malformed PLAIN message")
	}
	sess, err := cc.s.cfg.Backend.Authenticate(string(parts[2]), cc.host())
	if err != nil {
		return fail(err.Error())
	}
	if !cc.s.authenticated(cc, sess) {
		return fail("connection limit reached")
	}
	// A revocation between Authenticate and the line above closed the
	// connections it found registered, not this one: check again.
	if err := sess.Valid(); err != nil {
		return fail(err.Error())
	}
	return r
}
