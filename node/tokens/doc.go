// Package tokens is a node's registry of bearer tokens: it creates,
// authenticates, lists and revokes them, and keeps them in the node's
// metadata. It serves no request: the session layer checks a token's
// scopes (Token.Allows, Token.Sees) and package node closes the
// connections of a revoked one.
//
// A token's secret is "ledge_" + id + "_" + 43 characters of base64url
// (256 random bits). The registry stores the id, the SHA-256 of the whole
// secret, the scopes and the topic restriction; the secret itself is shown
// once, when the token is created. The id inside the secret finds the
// record without a table of hashes; the hash comparison is constant-time.
package tokens
