package termchat

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Event
	}{
		{"data lines", "data: {\"a\":1}\n\ndata: [DONE]\n\n", []Event{{Data: `{"a":1}`}, {Data: "[DONE]"}}},
		{"no space after the colon", "data:x\n\n", []Event{{Data: "x"}}},
		{"only one space is dropped", "data:  x\n\n", []Event{{Data: " x"}}},
		{"multi-line data", "data: a\ndata: b\n\n", []Event{{Data: "a\nb"}}},
		{"CRLF line endings", "data: a\r\n\r\ndata: b\r\n\r\n", []Event{{Data: "a"}, {Data: "b"}}},
		{"comments and keep-alives", ": keep-alive\n\ndata: a\n: note\n\n", []Event{{Data: "a"}}},
		{"named events", "event: error\ndata: {}\n\ndata: next\n\n", []Event{{Name: "error", Data: "{}"}, {Data: "next"}}},
		{"id and retry are skipped", "id: 7\nretry: 100\ndata: a\n\n", []Event{{Data: "a"}}},
		{"an event without data is not dispatched", "event: ping\n\ndata: a\n\n", []Event{{Data: "a"}}},
		{"an unterminated event is discarded", "data: a\n\ndata: cut", []Event{{Data: "a"}}},
		{"empty data", "data:\n\n", []Event{{Data: ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []Event
			if err := ReadEvents(strings.NewReader(tc.in), func(e Event) error { got = append(got, e); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadEventsStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := ReadEvents(strings.NewReader("data: 1\n\ndata: 2\n\n"), func(Event) error { n++; return stop })
	if err != stop || n != 1 {
		t.Fatalf("after fn's error: %v, %d events", err, n)
	}
}

// TestReadEventsBounded: a server cannot make the client hold an event
// larger than MaxEventBytes, in one line or in many.
func TestReadEventsBounded(t *testing.T) {
	long := "data: " + strings.Repeat("x", MaxEventBytes+1) + "\n\n"
	many := strings.Repeat("data: "+strings.Repeat("x", 1<<20)+"\n", 5) + "\n"
	for name, in := range map[string]string{"one line": long, "many lines": many} {
		err := ReadEvents(strings.NewReader(in), func(Event) error { t.Fatalf("%s: an oversized event was dispatched", name); return nil })
		if err == nil || !strings.Contains(err.Error(), "longer than") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
