package tokenizer

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner is a small JSON reader for the two big members of
// tokenizer.json, model.vocab and model.merges (hundreds of thousands of
// entries): decoding them with encoding/json costs several times the
// 200 ms load budget. Everything else is handed to encoding/json as raw
// bytes.
type jsonScanner struct {
	b []byte
	i int
}

var errJSON = errors.New("malformed JSON")

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", errJSON, s.i, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) peek() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("expected %q", c)
	}
	s.i++
	return nil
}

// strBytes reads a JSON string without allocating when it has no escapes;
// the result aliases the input (or a fresh buffer) and must not be kept.
func (s *jsonScanner) strBytes() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.errorf("expected a string")
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '"':
			s.i = j + 1
			return s.b[start:j], nil
		case '\\':
			v, err := s.str()
			return []byte(v), err
		}
	}
	return nil, s.errorf("unterminated string")
}

// str reads a JSON string.
func (s *jsonScanner) str() (string, error) {
	if s.peek() != '"' {
		return "", s.errorf("expected a string")
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := string(s.b[start:s.i])
			s.i++
			return v, nil
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		s.i++
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), nil
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if lo, ok := s.hex4(); ok {
						if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
							r2 = d
						} else {
							s.i = save
						}
					} else {
						s.i = save
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.errorf("bad escape \\%c", e)
		}
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// integer reads a JSON number that must be an integer.
func (s *jsonScanner) integer() (int64, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) && (s.b[s.i] == '-' || (s.b[s.i] >= '0' && s.b[s.i] <= '9')) {
		s.i++
	}
	v, err := strconv.ParseInt(string(s.b[start:s.i]), 10, 64)
	if err != nil {
		return 0, s.errorf("expected an integer")
	}
	return v, nil
}

// skip passes over one value and returns its raw bytes.
func (s *jsonScanner) skip() ([]byte, error) {
	s.ws()
	start := s.i
	if s.i >= len(s.b) {
		return nil, s.errorf("unexpected end of input")
	}
	switch s.b[s.i] {
	case '"':
		if _, err := s.str(); err != nil {
			return nil, err
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, err := s.str(); err != nil {
					return nil, err
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			s.i++
			if depth == 0 {
				return s.b[start:s.i], nil
			}
		}
		return nil, s.errorf("unexpected end of input")
	default:
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i], nil
			}
			s.i++
		}
	}
	return s.b[start:s.i], nil
}

// object calls fn for each member of an object; fn must consume the value.
func (s *jsonScanner) object(fn func(key string) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("expected ',' or '}'")
		}
	}
}

// objectBytes is object with keys as (non-retained) byte slices.
func (s *jsonScanner) objectBytes(fn func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		k, err := s.strBytes()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := fn(k); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		default:
			return s.errorf("expected ',' or '}'")
		}
	}
}

// array calls fn for each element of an array; fn must consume it.
func (s *jsonScanner) array(fn func() error) error {
	if err := s.expect('['); err != nil {
		return err
	}
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for {
		if err := fn(); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		default:
			return s.errorf("expected ',' or ']'")
		}
	}
}
