package output

import (
	"crypto/rand"
	"encoding/json"
	"math/big"
	"strings"
)

// Tool calls stream as they are generated. The held-back tool-call text is
// rescanned as it grows (it is short): each call's JSON object is scanned
// incrementally for its "name" and its "arguments" (or Llama 3's
// "parameters") value. Once the name is known and the arguments have begun
// (or the object has ended without any), the call is announced (a
// ToolDelta with its ID and Name), and from then on every new piece of the
// arguments' text is a ToolDelta of its own. The arguments' text is the
// value's raw JSON text (an object as the model wrote it), or, when the
// model wrote the arguments as a JSON string, that string's decoded text,
// streamed up to the last complete escape; so the concatenated deltas equal
// the call's final Arguments exactly.

// ToolDelta is a piece of a tool call as it is generated.
type ToolDelta struct {
	// Index is the call's position among the reply's calls (0, 1, ...).
	Index int
	// ID and Name are set in the call's first delta only: ID is the call's
	// id (24 random base62 characters, to which each API adds its prefix:
	// call_, toolu_, fc_).
	ID, Name string
	// Arguments is the next piece of the arguments' text.
	Arguments string
}

// ToolCall is one parsed function call.
type ToolCall struct {
	ID        string // as in its ToolDelta
	Name      string
	Arguments string // JSON text (an object, unless the model wrote otherwise)
	// Complete is false for a call cut short (max tokens) after it began
	// streaming: its arguments are what was generated.
	Complete bool
}

// NewCallID returns 24 random base62 characters, the id of a tool call.
func NewCallID() string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var b [24]byte
	max := big.NewInt(int64(len(digits)))
	for i := range b {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("crypto/rand: " + err.Error()) // never fails on supported platforms
		}
		b[i] = digits[n.Int64()]
	}
	return string(b[:])
}

// streamed is what has been sent of one call.
type streamed struct {
	id, name string
	args     string
}

// callScan is what is known so far of one call's JSON object.
type callScan struct {
	name     string
	hasName  bool
	hasArgs  bool   // the arguments value has begun
	args     string // its text so far (see the comment at the top)
	argsDone bool
	done     bool // the object (and, Hermes, its </tool_call>) has ended
	valid    bool // done, and the object is valid JSON with a string name
}

// scanTools scans the held tool-call text into calls; text after them that
// is not a call ends the scan (it is ignored, as vLLM ignores text around
// calls). final says the text is complete.
func scanTools(text string, final bool) []callScan {
	var calls []callScan
	s := strings.TrimLeft(text, " \t\r\n")
	hermes := strings.HasPrefix(s, toolOpen) || (!final && strings.HasPrefix(toolOpen, s))
	for s != "" {
		if hermes {
			if !strings.HasPrefix(s, toolOpen) {
				return calls
			}
			s = s[len(toolOpen):]
		}
		c, end := scanCall(s)
		if end < 0 {
			if c.hasName || c.hasArgs {
				calls = append(calls, c)
			}
			return calls
		}
		obj := s[:end]
		s = strings.TrimLeft(s[end:], " \t\r\n")
		if hermes {
			switch {
			case strings.HasPrefix(s, toolClose):
				s = s[len(toolClose):]
			case final && s == "": // the reply ended without </tool_call>
			case !final && strings.HasPrefix(toolClose, s):
				calls = append(calls, c) // </tool_call> still coming
				return calls
			default:
				return calls // not a call after all
			}
		} else if strings.HasPrefix(s, ";") {
			s = s[1:]
		}
		c.done = true
		c.valid = c.hasName && json.Valid([]byte(strings.TrimSpace(obj)))
		if !c.hasArgs {
			c.hasArgs, c.args, c.argsDone = true, "{}", true
		}
		calls = append(calls, c)
		s = strings.TrimLeft(s, " \t\r\n")
	}
	return calls
}

// scanCall scans one call object at the start of s (after whitespace). end
// is the index just past its closing brace, or -1 while it is incomplete or
// not an object.
func scanCall(s string) (c callScan, end int) {
	i := skipWS(s, 0)
	if i >= len(s) || s[i] != '{' {
		return c, -1
	}
	i++
	argsKey := ""
	for {
		i = skipWS(s, i)
		if i >= len(s) {
			return c, -1
		}
		if s[i] == '}' {
			return c, i + 1
		}
		if s[i] == ',' {
			i++
			continue
		}
		keyEnd := skipString(s, i)
		if keyEnd < 0 {
			return c, -1
		}
		var key string
		if json.Unmarshal([]byte(s[i:keyEnd]), &key) != nil {
			return c, -1
		}
		i = skipWS(s, keyEnd)
		if i >= len(s) || s[i] != ':' {
			return c, -1
		}
		i = skipWS(s, i+1)
		if i >= len(s) {
			return c, -1
		}
		vEnd := skipValue(s, i)
		isArgs := (key == "arguments" || key == "parameters") && (argsKey == "" || argsKey == key && !c.argsDone)
		switch {
		case key == "name" && !c.hasName:
			if vEnd < 0 {
				return c, -1
			}
			var name string
			if json.Unmarshal([]byte(s[i:vEnd]), &name) == nil && name != "" {
				c.name, c.hasName = name, true
			}
		case isArgs:
			argsKey = key
			c.hasArgs = true
			c.args, c.argsDone = argsText(s, i, vEnd)
		}
		if vEnd < 0 {
			return c, -1
		}
		i = vEnd
	}
}

// argsText is the arguments value starting at s[from] (ending at to, or
// still going on when to < 0) as the text that streams: raw JSON, or a
// string's decoded text up to its last complete escape.
func argsText(s string, from, to int) (string, bool) {
	if s[from] != '"' {
		if to < 0 {
			return s[from:], false
		}
		return s[from:to], true
	}
	if to >= 0 {
		var v string
		if json.Unmarshal([]byte(s[from:to]), &v) != nil {
			return "", false
		}
		return v, true
	}
	body := s[from+1:]
	cut := safeStringCut(body)
	var v string
	if json.Unmarshal([]byte(`"`+body[:cut]+`"`), &v) != nil {
		return "", false
	}
	return v, false
}

// safeStringCut is the length of the longest prefix of an unterminated
// JSON string body that ends outside an escape (and not between the two
// halves of a surrogate pair).
func safeStringCut(b string) int {
	cut := 0
	for i := 0; i < len(b); {
		if b[i] != '\\' {
			i++
			cut = i
			continue
		}
		if i+1 >= len(b) {
			return cut
		}
		if b[i+1] != 'u' {
			i += 2
			cut = i
			continue
		}
		if i+6 > len(b) {
			return cut
		}
		if hi := b[i+2 : i+6]; len(hi) == 4 && (hi[0] == 'd' || hi[0] == 'D') && strings.ContainsAny(hi[1:2], "89abAB") {
			// A high surrogate: its pair must follow before the cut.
			if i+12 > len(b) {
				return cut
			}
			i += 12
		} else {
			i += 6
		}
		cut = i
	}
	return cut
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the JSON string starting at s[i], or
// -1 when it is unterminated (or s[i] is not a quote).
func skipString(s string, i int) int {
	if i >= len(s) || s[i] != '"' {
		return -1
	}
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index past the JSON value starting at s[i], or -1
// when it is incomplete. Its validity is checked once the whole call is
// there (json.Valid).
func skipValue(s string, i int) int {
	switch s[i] {
	case '"':
		return skipString(s, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(s); j++ {
			switch s[j] {
			case '"':
				e := skipString(s, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	for j := i; j < len(s); j++ {
		switch s[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return -1 // a number or literal may go on
}

// toolDeltas compares a scan with what has been sent and returns what is
// new: announcements of calls whose name is known and whose arguments have
// begun, and the arguments' new text.
func (p *Processor) toolDeltas(calls []callScan) []ToolDelta {
	var out []ToolDelta
	for i, c := range calls {
		if !c.hasName || !c.hasArgs {
			break // calls announce in order
		}
		if i == len(p.sent) {
			p.sent = append(p.sent, streamed{id: NewCallID(), name: c.name})
			out = append(out, ToolDelta{Index: i, ID: p.sent[i].id, Name: c.name})
		}
		st := &p.sent[i]
		if len(c.args) > len(st.args) && strings.HasPrefix(c.args, st.args) {
			piece := c.args[len(st.args):]
			st.args = c.args
			if n := len(out); n > 0 && out[n-1].Index == i {
				out[n-1].Arguments += piece
			} else {
				out = append(out, ToolDelta{Index: i, Arguments: piece})
			}
		}
	}
	return out
}
