package termchat

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// blockQuote opens and closes a multi-line block, as in ollama.
const blockQuote = `"""`

// Input is one complete input: a message or a command.
type Input struct {
	// Text is the input with its continuation lines joined by "\n".
	Text string
	// Literal is set for a """ block opened at the start of the input: it
	// is always a message, even when it starts with "/".
	Literal bool
}

// Assembler joins the lines typed at the prompt into inputs. A line
// starting with """ opens a block that the next line ending with """
// closes (`"""one line"""` is a block of its own); a command whose
// argument starts with """ (`/system """`) takes a block as its argument;
// a line ending with a backslash continues on the next line (the backslash
// is dropped). The zero value is ready to use.
type Assembler struct {
	buf    strings.Builder
	prefix string // the command before a block argument ("/system ")
	mode   int
}

const (
	modeNone = iota
	modeBlock
	modeContinue
)

// Pending reports whether a block or a continued line is open: the next
// line belongs to it (the prompt shows "... ").
func (a *Assembler) Pending() bool { return a.mode != modeNone }

// Reset drops an open block or continued line.
func (a *Assembler) Reset() {
	a.buf.Reset()
	a.prefix, a.mode = "", modeNone
}

// Feed takes one line, without its line ending, and returns the input it
// completes, if any.
func (a *Assembler) Feed(line string) (Input, bool) {
	line = strings.TrimSuffix(line, "\r")
	switch a.mode {
	case modeBlock:
		before, closed := strings.CutSuffix(line, blockQuote)
		a.buf.WriteString(before)
		if !closed {
			a.buf.WriteByte('\n')
			return Input{}, false
		}
		return a.finish(), true
	case modeContinue:
		if before, ok := strings.CutSuffix(line, `\`); ok {
			a.buf.WriteString(before)
			a.buf.WriteByte('\n')
			return Input{}, false
		}
		a.buf.WriteString(line)
		in := Input{Text: a.buf.String()}
		a.Reset()
		return in, true
	}
	if rest, ok := strings.CutPrefix(line, blockQuote); ok {
		return a.open("", rest)
	}
	if strings.HasPrefix(line, "/") {
		if cmd, arg, ok := strings.Cut(line, " "); ok {
			if rest, ok := strings.CutPrefix(strings.TrimLeft(arg, " "), blockQuote); ok {
				return a.open(cmd+" ", rest)
			}
		}
	}
	if before, ok := strings.CutSuffix(line, `\`); ok {
		a.buf.WriteString(before)
		a.buf.WriteByte('\n')
		a.mode = modeContinue
		return Input{}, false
	}
	return Input{Text: line}, true
}

// open starts a block whose first line is rest (after the opening
// quotes); a block closed on the same line is complete at once.
func (a *Assembler) open(prefix, rest string) (Input, bool) {
	a.prefix, a.mode = prefix, modeBlock
	if before, closed := strings.CutSuffix(rest, blockQuote); closed {
		a.buf.WriteString(before)
		return a.finish(), true
	}
	a.buf.WriteString(rest)
	a.buf.WriteByte('\n')
	return Input{}, false
}

// finish completes a block: its text less the blank lines around it.
func (a *Assembler) finish() Input {
	in := Input{Text: a.prefix + strings.Trim(a.buf.String(), "\n"), Literal: a.prefix == ""}
	a.Reset()
	return in
}

// CommandKind says what a slash command does.
type CommandKind int

// The slash commands.
const (
	CmdHelp   CommandKind = iota + 1 // /help, /?
	CmdExit                          // /bye, /exit
	CmdReset                         // /reset, /clear: clear the history
	CmdSystem                        // /system TEXT: set the system prompt (and clear the history)
	CmdSet                           // /set KEY VALUE
	CmdUnset                         // /unset KEY: back to the server's default
	CmdShow                          // /show: the settings
)

// Setting keys of /set and /unset.
const (
	SetTemperature = "temperature"
	SetMaxTokens   = "max_tokens"
	SetIgnoreEOS   = "ignore_eos"
)

// Command is a parsed slash command.
type Command struct {
	Kind CommandKind
	// Text is /system's prompt ("" clears it).
	Text string
	// Key is /set's or /unset's setting; Value its parsed value (a
	// temperature, a token count, or 0/1 for ignore_eos).
	Key   string
	Value float64
}

// maxTokensLimit is the largest /set max_tokens taken (troupe's own cap).
const maxTokensLimit = 1 << 20

// ParseCommand parses a line starting with "/" into a command, or says
// what is wrong with it.
func ParseCommand(text string) (Command, error) {
	name, arg, _ := strings.Cut(strings.TrimSpace(text), " ")
	arg = strings.TrimSpace(arg)
	noArg := func(c Command) (Command, error) {
		if arg != "" {
			return Command{}, fmt.Errorf("%s takes no argument", name)
		}
		return c, nil
	}
	switch name {
	case "/help", "/?":
		return noArg(Command{Kind: CmdHelp})
	case "/bye", "/exit":
		return noArg(Command{Kind: CmdExit})
	case "/reset", "/clear":
		return noArg(Command{Kind: CmdReset})
	case "/show":
		return noArg(Command{Kind: CmdShow})
	case "/system":
		// The prompt is taken as typed, inner spacing and lines included.
		_, raw, _ := strings.Cut(text, " ")
		return Command{Kind: CmdSystem, Text: strings.TrimSpace(raw)}, nil
	case "/unset":
		switch arg {
		case SetTemperature, SetMaxTokens, SetIgnoreEOS:
			return Command{Kind: CmdUnset, Key: arg}, nil
		}
		return Command{}, fmt.Errorf("usage: /unset %s|%s|%s", SetTemperature, SetMaxTokens, SetIgnoreEOS)
	case "/set":
		return parseSet(arg)
	}
	return Command{}, fmt.Errorf("unknown command %s (/? lists them; start a message with \"\"\" to send text beginning with /)", name)
}

func parseSet(arg string) (Command, error) {
	key, value, _ := strings.Cut(arg, " ")
	value = strings.TrimSpace(value)
	key = strings.ReplaceAll(key, "-", "_")
	switch key {
	case SetTemperature:
		t, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(t) || t < 0 || t > 2 {
			return Command{}, fmt.Errorf("/set temperature takes a number from 0 to 2, not %q", value)
		}
		return Command{Kind: CmdSet, Key: key, Value: t}, nil
	case SetMaxTokens:
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > maxTokensLimit {
			return Command{}, fmt.Errorf("/set max_tokens takes a whole number from 1 to %d, not %q", maxTokensLimit, value)
		}
		return Command{Kind: CmdSet, Key: key, Value: float64(n)}, nil
	case SetIgnoreEOS:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return Command{}, fmt.Errorf("/set ignore_eos takes true or false, not %q", value)
		}
		v := 0.0
		if b {
			v = 1
		}
		return Command{Kind: CmdSet, Key: key, Value: v}, nil
	}
	return Command{}, fmt.Errorf("usage: /set %s X | /set %s N | /set %s true|false", SetTemperature, SetMaxTokens, SetIgnoreEOS)
}

// Len is the size of the open block or continued line so far.
func (a *Assembler) Len() int { return a.buf.Len() }
