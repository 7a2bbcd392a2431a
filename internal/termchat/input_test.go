package termchat

import (
	"reflect"
	"strings"
	"testing"
)

func TestAssembler(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lines []string
		want  []Input
	}{
		{"plain lines", []string{"hello", "", "/bye"}, []Input{{Text: "hello"}, {Text: ""}, {Text: "/bye"}}},
		{"a block", []string{`"""`, "one", "", "two", `"""`}, []Input{{Text: "one\n\ntwo", Literal: true}}},
		{"text on the quote lines", []string{`"""first`, "second", `third"""`}, []Input{{Text: "first\nsecond\nthird", Literal: true}}},
		{"a one-line block", []string{`"""/not a command"""`}, []Input{{Text: "/not a command", Literal: true}}},
		{"an empty block", []string{`""""""`}, []Input{{Text: "", Literal: true}}},
		{"indentation is kept", []string{`"""`, "  if x:", "    y", `"""`}, []Input{{Text: "  if x:\n    y", Literal: true}}},
		{"backslash inside a block is text", []string{`"""`, `a \`, `"""`}, []Input{{Text: `a \`, Literal: true}}},
		{"a command with a block", []string{`/system """You are`, "terse.", `"""`}, []Input{{Text: "/system You are\nterse."}}},
		{"backslash continuation", []string{`one \`, `two\`, "three"}, []Input{{Text: "one \ntwo\nthree"}}},
		{"CR line endings", []string{"hi\r"}, []Input{{Text: "hi"}}},
		{"after a block, lines are single again", []string{`"""a"""`, "b"}, []Input{{Text: "a", Literal: true}, {Text: "b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a Assembler
			var got []Input
			for i, l := range tc.lines {
				in, ok := a.Feed(l)
				if ok {
					got = append(got, in)
				}
				if last := i == len(tc.lines)-1; last && a.Pending() {
					t.Fatalf("still pending after the last line")
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestAssemblerPendingAndReset(t *testing.T) {
	var a Assembler
	if _, ok := a.Feed(`"""`); ok || !a.Pending() {
		t.Fatal(`""" did not open a block`)
	}
	a.Feed("dropped")
	a.Reset()
	if a.Pending() || a.Len() != 0 {
		t.Fatal("Reset left the block open")
	}
	if in, ok := a.Feed("fresh"); !ok || in.Text != "fresh" {
		t.Fatalf("after Reset: %q %v", in.Text, ok)
	}
}

func TestParseCommand(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Command
		err  string
	}{
		{"/help", Command{Kind: CmdHelp}, ""},
		{"/?", Command{Kind: CmdHelp}, ""},
		{"/bye", Command{Kind: CmdExit}, ""},
		{"/exit", Command{Kind: CmdExit}, ""},
		{"/reset", Command{Kind: CmdReset}, ""},
		{"/clear", Command{Kind: CmdReset}, ""},
		{"/show", Command{Kind: CmdShow}, ""},
		{"/system Be brief.  Very.", Command{Kind: CmdSystem, Text: "Be brief.  Very."}, ""},
		{"/system line one\nline two", Command{Kind: CmdSystem, Text: "line one\nline two"}, ""},
		{"/system", Command{Kind: CmdSystem}, ""},
		{"/set temperature 0.7", Command{Kind: CmdSet, Key: SetTemperature, Value: 0.7}, ""},
		{"/set temperature 0", Command{Kind: CmdSet, Key: SetTemperature, Value: 0}, ""},
		{"/set max_tokens 64", Command{Kind: CmdSet, Key: SetMaxTokens, Value: 64}, ""},
		{"/set max-tokens 64", Command{Kind: CmdSet, Key: SetMaxTokens, Value: 64}, ""},
		{"/set ignore_eos true", Command{Kind: CmdSet, Key: SetIgnoreEOS, Value: 1}, ""},
		{"/set ignore_eos false", Command{Kind: CmdSet, Key: SetIgnoreEOS, Value: 0}, ""},
		{"/unset temperature", Command{Kind: CmdUnset, Key: SetTemperature}, ""},
		{"/set temperature hot", Command{}, "0 to 2"},
		{"/set temperature 3", Command{}, "0 to 2"},
		{"/set temperature NaN", Command{}, "0 to 2"},
		{"/set max_tokens 0", Command{}, "whole number"},
		{"/set max_tokens 1.5", Command{}, "whole number"},
		{"/set max_tokens 99999999999", Command{}, "whole number"},
		{"/set ignore_eos maybe", Command{}, "true or false"},
		{"/set color blue", Command{}, "usage: /set"},
		{"/set", Command{}, "usage: /set"},
		{"/unset everything", Command{}, "usage: /unset"},
		{"/bye now", Command{}, "takes no argument"},
		{"/frobnicate", Command{}, "unknown command /frobnicate"},
	} {
		got, err := ParseCommand(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want one saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestConversation(t *testing.T) {
	var c Conversation
	if got := c.With("hi"); !reflect.DeepEqual(got, []Message{{"user", "hi"}}) {
		t.Fatalf("empty: %v", got)
	}
	c.SetSystem("Be brief.")
	c.Add("hi", "hello")
	want := []Message{{"system", "Be brief."}, {"user", "hi"}, {"assistant", "hello"}, {"user", "again"}}
	if got := c.With("again"); !reflect.DeepEqual(got, want) || c.Turns() != 1 {
		t.Fatalf("with history: %v (%d turns)", got, c.Turns())
	}
	if c.Turns() != 1 {
		t.Fatal("With changed the history")
	}
	c.Reset()
	if got := c.With("x"); !reflect.DeepEqual(got, []Message{{"system", "Be brief."}, {"user", "x"}}) {
		t.Fatalf("Reset did not keep the system prompt alone: %v", got)
	}
	c.Add("a", "b")
	c.SetSystem("")
	if got := c.With("x"); !reflect.DeepEqual(got, []Message{{"user", "x"}}) {
		t.Fatalf("SetSystem did not clear the history and the prompt: %v", got)
	}
}
