package termchat

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// MaxEventBytes bounds one server-sent event (its lines and its data
// together): a server streaming an endless line cannot exhaust the
// client's memory.
const MaxEventBytes = 4 << 20

// Event is one server-sent event.
type Event struct {
	// Name is the event field ("" for the default type, "message").
	Name string
	// Data is the event's data lines joined with "\n".
	Data string
}

// ReadEvents reads server-sent events from r and calls fn for each one, in
// order, until r ends, fn returns an error (returned as is) or an event is
// larger than MaxEventBytes. Comments, id and retry fields are skipped; an
// event that r ends in the middle of is discarded, as the specification
// says.
func ReadEvents(r io.Reader, fn func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventBytes)
	var (
		name    string
		data    strings.Builder
		hasData bool
	)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData {
				if err := fn(Event{Name: name, Data: data.String()}); err != nil {
					return err
				}
			}
			name, hasData = "", false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			name = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			if data.Len()+len(value) > MaxEventBytes {
				return fmt.Errorf("reading the event stream: an event longer than %d bytes", MaxEventBytes)
			}
			data.WriteString(value)
			hasData = true
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("reading the event stream: a line longer than %d bytes", MaxEventBytes)
		}
		return fmt.Errorf("reading the event stream: %w", err)
	}
	return nil
}
