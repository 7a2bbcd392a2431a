package grammar

import (
	"fmt"
	"strings"
)

// Regular expressions (anchored, in JSON mode) for JSON Schema formats.
const (
	fmtDate = `[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31|02-29)`
	// fmtTime: RFC 3339's full-time. A leap second (:60) is refused: it is
	// valid only at 23:59 UTC, which depends on the offset.
	fmtTime = `(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`
	fmtHex  = `[0-9a-fA-F]`
	fmtUUID = fmtHex + `{8}-` + fmtHex + `{4}-` + fmtHex + `{4}-` + fmtHex + `{4}-` + fmtHex + `{12}`
	// fmtLabel is a DNS label: letters, digits and inner hyphens, at most
	// 63 characters.
	fmtLabel    = `[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?`
	fmtHostname = fmtLabel + `(?:\.` + fmtLabel + `)*`
	fmtAtext    = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
	// fmtEmail: a dot-atom local part of at most 64 characters (RFC 5321),
	// as one atom or up to three of at most 20 each, then a hostname.
	fmtEmail = `(?:` + fmtAtext + `{1,64}|` + fmtAtext + `{1,20}(?:\.` + fmtAtext + `{1,20}){1,2})@` + fmtHostname
	fmtOctet = `(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`
	fmtIPv4  = fmtOctet + `(?:\.` + fmtOctet + `){3}`
	// fmtURI: a scheme, ':', then RFC 3986's characters (unreserved,
	// reserved, percent-encodings); the parts are not checked further.
	fmtURI = `[A-Za-z][A-Za-z0-9+.-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*`
	// fmtRelativeRef: RFC 3986's relative reference, as loosely as fmtURI:
	// a first segment without ':' (so it cannot be read as a scheme), then
	// from the first '/', '?' or '#' on RFC 3986's characters.
	fmtRelativeRef = `(?:[A-Za-z0-9\-._~!$&'()*+,;=@]|%[0-9A-Fa-f]{2})*(?:[/?#](?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*)?`
)

// fmtIPv6 is RFC 4291's text forms as RFC 3986's IPv6address spells them:
// eight groups, or fewer around one "::", the last 32 bits possibly as an
// IPv4 address.
func fmtIPv6() string {
	h16 := fmtHex + `{1,4}`
	ls32 := `(?:` + h16 + `:` + h16 + `|` + fmtIPv4 + `)`
	groups := func(n int) string { // n times h16 ":"
		if n == 0 {
			return ""
		}
		return fmt.Sprintf(`(?:%s:){%d}`, h16, n)
	}
	upTo := func(n int) string { // [ *n( h16 ":" ) h16 ]
		if n == 0 {
			return `(?:` + h16 + `)?`
		}
		return fmt.Sprintf(`(?:(?:%s:){0,%d}%s)?`, h16, n, h16)
	}
	alts := []string{
		groups(6) + ls32,
		`::` + groups(5) + ls32,
		upTo(0) + `::` + groups(4) + ls32,
		upTo(1) + `::` + groups(3) + ls32,
		upTo(2) + `::` + groups(2) + ls32,
		upTo(3) + `::` + h16 + `:` + ls32,
		upTo(4) + `::` + ls32,
		upTo(5) + `::` + h16,
		upTo(6) + `::`,
	}
	return strings.Join(alts, "|")
}

// Format returns a symbol for the content of a JSON string (characters as
// JSONChar takes them, raw or escaped) valid for the JSON Schema format
// name: "date", "time", "date-time" (RFC 3339 full-date, full-time with a
// required offset, date-time with T or t; February 29 is allowed in every
// year), "uuid" (either case), "email" (dot-atoms of atext, '@', a
// hostname), "ipv4", "ipv6" (RFC 4291 text forms, "::" compression and a
// trailing IPv4 included), "hostname" (labels of at most 63 characters;
// the 253-character total is not checked), "uri" (a scheme, ':' and RFC
// 3986's characters), "uri-reference" (a URI or a relative reference).
// Other names fail with an error that names them.
func (b *Builder) Format(name string) (Sym, error) {
	pat, err := formatPattern(name)
	if err != nil {
		return Sym{}, err
	}
	s, err := b.Regex(pat, RegexOptions{JSON: true, Anchored: true})
	if err != nil {
		return Sym{}, fmt.Errorf("grammar: format %q: %w", name, err)
	}
	return s, nil
}

// formatPattern is the regular expression (ECMA-262, full match) of a
// format's strings.
func formatPattern(name string) (string, error) {
	switch name {
	case "date":
		return fmtDate, nil
	case "time":
		return fmtTime, nil
	case "date-time":
		return fmtDate + `[Tt]` + fmtTime, nil
	case "uuid":
		return fmtUUID, nil
	case "email":
		return fmtEmail, nil
	case "ipv4":
		return fmtIPv4, nil
	case "ipv6":
		return fmtIPv6(), nil
	case "hostname":
		return fmtHostname, nil
	case "uri":
		return fmtURI, nil
	case "uri-reference":
		return `(?:` + fmtURI + `|` + fmtRelativeRef + `)`, nil
	}
	return "", fmt.Errorf("grammar: format %q is unsupported", name)
}
