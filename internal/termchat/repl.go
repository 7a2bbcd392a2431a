package termchat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxInputBytes bounds one input (a line, or a block's lines together):
// the size of troupe's default request body limit.
const MaxInputBytes = 8 << 20

// The prompts and the hint shown for Ctrl-C at the prompt, as ollama's.
const (
	Prompt         = ">>> "
	PromptContinue = "... "
	ExitHint       = "Use Ctrl + d or /bye to exit."
	// InterruptedMark follows a reply that Ctrl-C stopped.
	InterruptedMark = "[interrupted]"
)

// ErrInterrupted is Run's error when Ctrl-C stops a non-interactive chat.
var ErrInterrupted = errors.New("interrupted")

// Config configures Run.
type Config struct {
	// Client reaches the server.
	Client *Client
	// Model is the model to ask; "" means the first the server lists.
	Model string
	// System is the initial system prompt.
	System string
	// Temperature, MaxTokens and IgnoreEOS are the initial sampling
	// settings (nil: the server's default); /set changes them.
	Temperature *float64
	MaxTokens   *int
	IgnoreEOS   bool

	// In is read line by line; Out receives the replies (and, when
	// Interactive, the prompts); Err receives the errors of an interactive
	// chat.
	In       io.Reader
	Out, Err io.Writer
	// Interactive is for a person at a terminal: prompts, a banner, notes
	// on commands, and errors reported without ending the chat. Without it
	// (input from a pipe or a file) Out gets the replies alone, one after
	// another, and the first error ends Run.
	Interactive bool
	// Terminal says Out is a terminal: reasoning is dimmed with ANSI codes,
	// and control characters in the server's text are shown as U+FFFD
	// rather than sent to the terminal.
	Terminal bool
	// HideThinking leaves the reasoning out.
	HideThinking bool
	// Interrupt delivers Ctrl-C (SIGINT). One while a reply streams stops
	// that reply; one at the prompt drops the open block and shows
	// ExitHint. Without Interactive, one ends Run with ErrInterrupted.
	Interrupt <-chan os.Signal
}

// Run chats until the input ends, /bye, or ctx ends (then it returns nil,
// like a server shutting down on SIGTERM).
func Run(ctx context.Context, cfg Config) error {
	if cfg.Model == "" {
		name, err := firstModel(ctx, cfg.Client, cfg.Interrupt)
		if err != nil {
			return err
		}
		cfg.Model = name
	}
	s := &session{cfg: cfg}
	s.conv.SetSystem(cfg.System)
	lines := make(chan lineRead)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(cfg.In, lines, stop)
	if cfg.Interactive {
		fmt.Fprintf(cfg.Out, "%s\n", s.dim(fmt.Sprintf("Chatting with %s. /? for help, Ctrl-D or /bye to exit.", cfg.Model)))
	}
	return s.loop(ctx, lines)
}

// firstModel asks the server for its models and returns the first; Ctrl-C
// meanwhile gives up with ErrInterrupted.
func firstModel(ctx context.Context, c *Client, interrupt <-chan os.Signal) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, err := c.Models(ctx)
		done <- result{names, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-interrupt:
		cancel()
		<-done
		return "", ErrInterrupted
	}
	if res.err != nil {
		return "", res.err
	}
	if len(res.names) == 0 {
		return "", errors.New("the server lists no models (GET /v1/models); name one")
	}
	return res.names[0], nil
}

// session is one Run's state.
type session struct {
	cfg  Config
	conv Conversation
	asm  Assembler
}

func (s *session) loop(ctx context.Context, lines <-chan lineRead) error {
	for {
		if ctx.Err() != nil {
			return nil
		}
		if s.cfg.Interactive {
			if s.asm.Pending() {
				io.WriteString(s.cfg.Out, PromptContinue)
			} else {
				io.WriteString(s.cfg.Out, Prompt)
			}
		}
		select {
		case <-ctx.Done():
			if s.cfg.Interactive {
				fmt.Fprintln(s.cfg.Out)
			}
			return nil
		case <-s.cfg.Interrupt:
			if !s.cfg.Interactive {
				return ErrInterrupted
			}
			s.asm.Reset()
			fmt.Fprintf(s.cfg.Out, "\n%s\n", ExitHint)
		case l := <-lines:
			if l.err != nil {
				if s.cfg.Interactive {
					fmt.Fprintln(s.cfg.Out)
				}
				if errors.Is(l.err, io.EOF) {
					if s.asm.Pending() && !s.cfg.Interactive {
						return errors.New(`the input ended inside a """ block or a continued line; it was not sent`)
					}
					return nil
				}
				return fmt.Errorf("reading input: %w", l.err)
			}
			in, ok := s.asm.Feed(l.text)
			if s.asm.Len() > MaxInputBytes {
				s.asm.Reset()
				if err := s.fail(fmt.Errorf("the message is longer than %d bytes; dropped", MaxInputBytes)); err != nil {
					return err
				}
				continue
			}
			if !ok {
				continue
			}
			exit, err := s.handle(ctx, in)
			if err != nil {
				if err := s.fail(err); err != nil {
					return err
				}
			}
			if exit {
				return nil
			}
		}
	}
}

// fail reports err: on Err in an interactive chat (which goes on), as
// Run's error otherwise.
func (s *session) fail(err error) error {
	if !s.cfg.Interactive {
		return err
	}
	fmt.Fprintf(s.cfg.Err, "Error: %v\n", err)
	return nil
}

// handle runs one input; exit says the chat is over.
func (s *session) handle(ctx context.Context, in Input) (exit bool, err error) {
	if strings.TrimSpace(in.Text) == "" {
		return false, nil
	}
	if !in.Literal && strings.HasPrefix(in.Text, "/") {
		return s.command(in.Text)
	}
	return false, s.turn(ctx, in.Text)
}

func (s *session) note(format string, args ...any) {
	if s.cfg.Interactive {
		fmt.Fprintf(s.cfg.Out, format+"\n", args...)
	}
}

func (s *session) command(text string) (exit bool, err error) {
	c, err := ParseCommand(text)
	if err != nil {
		return false, err
	}
	switch c.Kind {
	case CmdHelp:
		io.WriteString(s.cfg.Out, help)
	case CmdExit:
		return true, nil
	case CmdReset:
		s.conv.Reset()
		s.note("Cleared the conversation.")
	case CmdSystem:
		s.conv.SetSystem(c.Text)
		if c.Text == "" {
			s.note("Removed the system prompt; cleared the conversation.")
		} else {
			s.note("Set the system prompt; cleared the conversation.")
		}
	case CmdSet:
		switch c.Key {
		case SetTemperature:
			t := c.Value
			s.cfg.Temperature = &t
		case SetMaxTokens:
			n := int(c.Value)
			s.cfg.MaxTokens = &n
		case SetIgnoreEOS:
			s.cfg.IgnoreEOS = c.Value != 0
		}
		s.note("Set %s to %s.", c.Key, s.setting(c.Key))
	case CmdUnset:
		switch c.Key {
		case SetTemperature:
			s.cfg.Temperature = nil
		case SetMaxTokens:
			s.cfg.MaxTokens = nil
		case SetIgnoreEOS:
			s.cfg.IgnoreEOS = false
		}
		s.note("Unset %s.", c.Key)
	case CmdShow:
		system := s.conv.System()
		if system == "" {
			system = "(none)"
		}
		fmt.Fprintf(s.cfg.Out, "model: %s\nsystem: %s\n%s: %s\n%s: %s\n%s: %s\nexchanges in the conversation: %d\n",
			s.cfg.Model, system, SetTemperature, s.setting(SetTemperature), SetMaxTokens, s.setting(SetMaxTokens),
			SetIgnoreEOS, s.setting(SetIgnoreEOS), s.conv.Turns())
	}
	return false, nil
}

// setting is a setting's value as /show prints it.
func (s *session) setting(key string) string {
	switch key {
	case SetTemperature:
		if s.cfg.Temperature != nil {
			return strconv.FormatFloat(*s.cfg.Temperature, 'g', -1, 64)
		}
	case SetMaxTokens:
		if s.cfg.MaxTokens != nil {
			return strconv.Itoa(*s.cfg.MaxTokens)
		}
	case SetIgnoreEOS:
		return strconv.FormatBool(s.cfg.IgnoreEOS)
	}
	return "the server's default"
}

// turn sends text with the history and streams the reply to Out. A reply
// stopped by Ctrl-C is kept in the history when any of it arrived (and
// dropped, question and all, when none did); a failed one is dropped.
func (s *session) turn(ctx context.Context, text string) error {
	req := Request{Model: s.cfg.Model, Messages: s.conv.With(text), Temperature: s.cfg.Temperature,
		MaxTokens: s.cfg.MaxTokens, IgnoreEOS: s.cfg.IgnoreEOS}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &printer{w: s.cfg.Out, terminal: s.cfg.Terminal, hide: s.cfg.HideThinking, atLineStart: true}
	type result struct {
		reply Reply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		r, err := s.cfg.Client.Stream(rctx, req, p.delta)
		done <- result{r, err}
	}()
	var res result
	interrupted := false
	select {
	case res = <-done:
	case <-s.cfg.Interrupt:
		interrupted = true
		cancel()
		res = <-done
	case <-ctx.Done():
		cancel()
		res = <-done
	}
	p.end()
	switch {
	case res.err == nil:
		s.conv.Add(text, res.reply.Content)
		if s.cfg.Interactive {
			fmt.Fprintln(s.cfg.Out)
		}
		return nil
	case ctx.Err() != nil:
		return nil // the chat is ending
	case interrupted && errors.Is(res.err, context.Canceled):
		if res.reply.Content != "" {
			s.conv.Add(text, res.reply.Content)
		}
		if !s.cfg.Interactive {
			return ErrInterrupted
		}
		fmt.Fprintf(s.cfg.Out, "%s\n\n", s.dim(InterruptedMark))
		return nil
	}
	return res.err
}

func (s *session) dim(text string) string {
	if s.cfg.Terminal {
		return ansiDim + text + ansiReset
	}
	return text
}

const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

const help = `Commands:
  /system TEXT                 set the system prompt and clear the conversation
                               (/system alone removes it; /system """ takes a block)
  /set temperature X           sampling temperature, 0 to 2
  /set max_tokens N            longest reply, in tokens
  /set ignore_eos true|false   generate past the end of sequence (troupe, vLLM)
  /unset KEY                   back to the server's default
  /show                        the model and the settings
  /reset, /clear               clear the conversation (the system prompt stays)
  /bye, /exit                  leave (or Ctrl-D at an empty prompt)
  /?, /help                    this help

Begin and end a multi-line message with """; end a line with \ to continue it.
Ctrl-C stops a reply; the part shown stays in the conversation.
`

// printer writes a streamed reply: the reasoning first, between
// "Thinking..." and "...done thinking." (dimmed on a terminal), then the
// answer.
type printer struct {
	w              io.Writer
	terminal, hide bool
	thinking       bool
	atLineStart    bool
}

func (p *printer) delta(d Delta) {
	if d.Reasoning != "" && !p.hide {
		if !p.thinking {
			p.newline()
			p.raw(p.dimOn() + "Thinking...\n")
			p.thinking = true
		}
		p.text(d.Reasoning)
	}
	if d.Content != "" {
		p.endThinking()
		p.text(d.Content)
	}
}

// end closes the reply: the dimming off, the cursor at a line start.
func (p *printer) end() {
	if p.thinking && p.terminal {
		p.raw(ansiReset)
	}
	p.thinking = false
	p.newline()
}

func (p *printer) endThinking() {
	if !p.thinking {
		return
	}
	p.newline()
	p.raw("...done thinking.\n" + p.dimOff() + "\n")
	p.thinking = false
}

func (p *printer) dimOn() string {
	if p.terminal {
		return ansiDim
	}
	return ""
}

func (p *printer) dimOff() string {
	if p.terminal {
		return ansiReset
	}
	return ""
}

func (p *printer) newline() {
	if !p.atLineStart {
		p.raw("\n")
	}
}

func (p *printer) raw(s string) {
	io.WriteString(p.w, s)
	p.atLineStart = strings.HasSuffix(s, "\n")
}

func (p *printer) text(s string) {
	if p.terminal {
		s = Sanitize(s)
	}
	if s != "" {
		p.raw(s)
	}
}

// Sanitize replaces the control characters of text other than newline and
// tab (escape sequences, carriage returns, C1 controls) with U+FFFD, so
// that a model's output cannot move the cursor, recolour or retitle the
// user's terminal.
func Sanitize(text string) string {
	clean := true
	for _, r := range text {
		if isControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return text
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '\uFFFD'
		}
		return r
	}, text)
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f)
}

// lineRead is one line of input or the error that ended it.
type lineRead struct {
	text string
	err  error
}

// readLines sends r's lines (without line endings) until it ends or stop
// closes; the last is the error that ended r (io.EOF at its end).
func readLines(r io.Reader, out chan<- lineRead, stop <-chan struct{}) {
	br := bufio.NewReader(r)
	send := func(l lineRead) bool {
		select {
		case out <- l:
			return true
		case <-stop:
			return false
		}
	}
	for {
		line, err := readLine(br)
		if (err == nil || line != "") && !send(lineRead{text: line}) {
			return
		}
		if err != nil {
			send(lineRead{err: err})
			return
		}
	}
}

// readLine reads one line of at most MaxInputBytes.
func readLine(br *bufio.Reader) (string, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxInputBytes {
			return "", fmt.Errorf("a line longer than %d bytes", MaxInputBytes)
		}
		buf = append(buf, chunk...)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil:
			return string(buf), err
		}
		return strings.TrimSuffix(string(buf), "\n"), nil
	}
}
