package abi

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONField returns the raw JSON text of the member that path names in
// the JSON object doc, and whether it exists. path is a dot-separated list
// of member names ("site" or "device.site"); each name but the last must
// name an object. A string member's raw text includes its quotes.
//
// It is the lookup behind the host's json_get and match_json helpers. It
// scans without decoding and is lenient: it finds members of well-formed
// JSON, the first one when a name repeats, and reports "not found" on
// input it cannot follow. It never allocates unless a member name holds
// escape sequences.
func JSONField(doc []byte, path string) ([]byte, bool) {
	start, end, ok := JSONFieldSpan(doc, path)
	if !ok {
		return nil, false
	}
	return doc[start:end:end], true
}

// JSONFieldSpan is JSONField returning the member's position in doc:
// doc[start:end] is its raw text.
func JSONFieldSpan(doc []byte, path string) (start, end int, ok bool) {
	base := 0
	for {
		name, rest, more := strings.Cut(path, ".")
		s, e, ok := objectMember(doc, name)
		if !ok || !more {
			return base + s, base + e, ok
		}
		doc, path, base = doc[s:e], rest, base+s
	}
}

// JSONValueEquals reports whether the raw JSON value raw equals want: a
// string's decoded text must equal want (escape sequences are decoded),
// any other value's raw text must equal want byte for byte ("42", "true",
// "null").
func JSONValueEquals(raw, want []byte) bool {
	if len(raw) >= 2 && raw[0] == '"' {
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') < 0 {
			return bytes.Equal(s, want)
		}
		d, ok := unescape(s)
		return ok && bytes.Equal(d, want)
	}
	return bytes.Equal(raw, want)
}

// JSONValueEqualsString is JSONValueEquals with want as a string, without
// converting it.
func JSONValueEqualsString(raw []byte, want string) bool {
	if len(raw) >= 2 && raw[0] == '"' {
		s := raw[1 : len(raw)-1]
		if bytes.IndexByte(s, '\\') < 0 {
			return string(s) == want
		}
		d, ok := unescape(s)
		return ok && string(d) == want
	}
	return string(raw) == want
}

// MatchJSON keeps, in keep, each record of v whose value is a JSON object
// with a member at path equal to want (JSONValueEquals), drops the others,
// and returns the number kept. It is the host's match_json helper.
func MatchJSON(v *View, path string, want []byte, keep Bitmap) int {
	n := 0
	for i := 0; i < v.Len(); i++ {
		raw, ok := JSONField(v.Record(i).Value(), path)
		ok = ok && JSONValueEquals(raw, want)
		keep.Set(i, ok)
		if ok {
			n++
		}
	}
	return n
}

// MatchContains keeps, in keep, each record of v whose value contains
// needle, drops the others, and returns the number kept. It is the host's
// match_contains helper.
func MatchContains(v *View, needle []byte, keep Bitmap) int {
	n := 0
	for i := 0; i < v.Len(); i++ {
		ok := bytes.Contains(v.Record(i).Value(), needle)
		keep.Set(i, ok)
		if ok {
			n++
		}
	}
	return n
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// objectMember finds the member name in the object at the start of doc and
// returns the span of its value.
func objectMember(doc []byte, name string) (start, end int, ok bool) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return 0, 0, false
	}
	i++
	for {
		i = skipSpace(doc, i)
		if i >= len(doc) || doc[i] != '"' {
			return 0, 0, false // '}' (end of object) or malformed
		}
		end, escaped := scanString(doc, i+1)
		if end < 0 {
			return 0, 0, false
		}
		key := doc[i+1 : end]
		var match bool
		if !escaped {
			match = string(key) == name
		} else if d, ok := unescape(key); ok {
			match = string(d) == name
		}
		i = skipSpace(doc, end+1)
		if i >= len(doc) || doc[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(doc, i+1)
		vend := skipValue(doc, i)
		if vend < 0 {
			return 0, 0, false
		}
		if match {
			return i, vend, true
		}
		i = skipSpace(doc, vend)
		if i >= len(doc) || doc[i] != ',' {
			return 0, 0, false
		}
		i++
	}
}

// scanString returns the index of the quote closing the string whose
// contents start at b[start], and whether the string holds a backslash;
// -1 when it is not closed.
func scanString(b []byte, start int) (end int, escaped bool) {
	i := start
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1, false
		}
		j += i
		// The quote is escaped when an odd number of backslashes precede it.
		k := j
		for k > start && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j, bytes.IndexByte(b[start:j], '\\') >= 0
		}
		i = j + 1
	}
}

// skipValue returns the index just past the JSON value starting at b[i],
// or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := scanString(b, i+1)
		if end < 0 {
			return -1
		}
		return end + 1
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			case '"':
				end, _ := scanString(b, i+1)
				if end < 0 {
					return -1
				}
				i = end
			}
			i++
		}
		return -1
	}
	// A number or a literal: up to the next delimiter.
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || isSpace(c) {
			break
		}
		if c == '"' || c == '{' || c == '[' || c == ':' {
			return -1
		}
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// unescape decodes the contents of a JSON string.
func unescape(s []byte) ([]byte, bool) {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, false
		}
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s, i+1)
			if !ok {
				return nil, false
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(s, i+3); ok && i+2 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					}
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return out, true
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
