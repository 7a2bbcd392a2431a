package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"golang.org/x/term"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/hub"
	"github.com/troupe-ai/troupe/internal/termchat"
)

// cmdChat is `troupe chat`: a terminal chat with a model loaded here
// (behind a loopback server) or with a running server (--url). It handles
// SIGINT itself (main leaves it alone for chat): Ctrl-C stops a reply, not
// the command; SIGTERM ends it through ctx.
func cmdChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "", "talk to a running server (troupe or any OpenAI-compatible one) instead of loading a model here")
	model := fs.String("model", "", "the model: a folder to load here (default: the built-in demo model), or with --url the served name (default: the server's first); or give it as the argument")
	apiKey := fs.String("api-key", "", "bearer token for --url (default: $TROUPE_API_KEY, else $OPENAI_API_KEY)")
	system := fs.String("system", "", "system prompt")
	var cfg termchat.Config
	fs.Func("temperature", "sampling temperature, 0 to 2 (default: the server's)", func(s string) error {
		c, err := termchat.ParseCommand("/set temperature " + s)
		cfg.Temperature = &c.Value
		return err
	})
	fs.Func("max-tokens", "longest reply in tokens (default: the server's)", func(s string) error {
		c, err := termchat.ParseCommand("/set max_tokens " + s)
		n := int(c.Value)
		cfg.MaxTokens = &n
		return err
	})
	fs.BoolVar(&cfg.IgnoreEOS, "ignore-eos", false, "generate past the model's end of sequence, up to --max-tokens (troupe, vLLM)")
	fs.BoolVar(&cfg.HideThinking, "hide-thinking", false, "do not show the model's reasoning")
	tmpl := fs.String("chat-template", "", "model loaded here: a chat template file overriding the model's")
	threads := fs.Int("threads", 0, "model loaded here: compute threads (0 = all cores)")
	kvBudget := fs.String("kv-budget", "1GiB", "model loaded here: memory for the conversation's state (bytes, or with KiB/MiB/GiB)")
	logLevel := fs.String("log-level", "warn", "model loaded here: the runtime's log level on stderr (debug, info, warn, error)")
	loadDelay := fs.Duration("debug-load-delay", 0, "testing: delay the weight load by this long")
	fs.Usage = func() { chatUsage(fs) }
	// The model may come before or after the flags, as serve takes it.
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case len(positional) > 1:
		return fmt.Errorf("chat: unexpected argument %q: give one model (chat [MODEL] [flags])", positional[1])
	case len(positional) == 1 && set["model"] && *model != positional[0]:
		return fmt.Errorf("chat: two models given, %q and --model %q", positional[0], *model)
	case len(positional) == 1:
		*model = positional[0]
	}
	cfg.System = *system

	// Ctrl-C from here on is the chat's to handle.
	intr := make(chan os.Signal, 1)
	signal.Notify(intr, os.Interrupt)
	defer signal.Stop(intr)
	cfg.Interrupt = intr

	if *url != "" {
		for _, local := range []string{"chat-template", "threads", "kv-budget", "log-level", "debug-load-delay"} {
			if set[local] {
				return fmt.Errorf("chat: --%s applies to a model loaded here, not to a server at --url", local)
			}
		}
		u, err := neturl.Parse(*url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("chat: --url %q is not an http:// or https:// address", *url)
		}
		key := *apiKey
		for _, env := range []string{"TROUPE_API_KEY", "OPENAI_API_KEY"} {
			if key == "" {
				key = os.Getenv(env)
			}
		}
		cfg.Client = &termchat.Client{BaseURL: *url, APIKey: key}
		cfg.Model = *model
	} else {
		if set["api-key"] {
			return errors.New("chat: --api-key is for a server at --url; a model loaded here needs none")
		}
		budget, err := parseBytes(*kvBudget)
		if err != nil {
			return fmt.Errorf("chat: --kv-budget: %w", err)
		}
		var level slog.Level
		if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
			return fmt.Errorf("chat: --log-level: %w", err)
		}
		if *threads < 0 {
			return errors.New("chat: --threads must be >= 0")
		}
		client, stop, err := startLocal(ctx, troupe.Options{Model: *model, ChatTemplate: *tmpl, Threads: *threads,
			KVBudget: budget, LoadDelay: *loadDelay, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))},
			stderr, intr)
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		defer stop()
		cfg.Client = client
	}
	cfg.In, cfg.Out, cfg.Err = stdin, stdout, stderr
	cfg.Interactive, cfg.Terminal = isTerminal(stdin), isTerminal(stdout)
	if err := termchat.Run(ctx, cfg); err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	return nil
}

// startLocal loads a model here and serves it on a loopback port, behind a
// random API key so that no other local user's program can use it, and
// returns a client for it once the model is ready. Loading shows its
// phases on stderr; a model that fails to load is an error, as is Ctrl-C
// meanwhile. stop shuts the server and the runtime down.
func startLocal(ctx context.Context, opts troupe.Options, stderr io.Writer, intr <-chan os.Signal) (client *termchat.Client, stop func(), err error) {
	if name, ok := strings.CutPrefix(opts.Model, ollamaPrefix); ok {
		if opts.Model, err = resolveModel(opts.Model); err != nil {
			return nil, nil, err
		}
		if opts.ServedName == "" {
			opts.ServedName = name
		}
	}
	if isHubModel(opts.Model) {
		// org/name from the Hugging Face Hub, as serve takes it.
		snap, err := pullModel(ctx, opts.Model, hub.DefaultRevision, stderr, opts.Logger)
		if err != nil {
			return nil, nil, err
		}
		if opts.ServedName == "" {
			opts.ServedName = opts.Model
		}
		opts.Model = snap.Model
	}
	if err := checkModelDir(opts.Model); err != nil {
		return nil, nil, err
	}
	// One person chats: one sequence at a time, the history reused.
	opts.Parallel, opts.PromptCache = 1, true
	rt, err := troupe.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	key := rand.Text()
	srv := troupehttp.New(rt, troupehttp.Config{APIKeys: []string{key}, Parallel: opts.Parallel, Logger: opts.Logger})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		rt.Close()
		return nil, nil, fmt.Errorf("listening on loopback: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	stop = func() {
		if err := srv.Shutdown(time.Second); err != nil {
			opts.Logger.Warn("shutdown", "err", err)
		}
		rt.Close()
	}
	if err := waitLoaded(ctx, rt, stderr, intr, served); err != nil {
		stop()
		return nil, nil, err
	}
	return &termchat.Client{BaseURL: "http://" + ln.Addr().String(), APIKey: key}, stop, nil
}

// waitLoaded waits until the model is ready, printing the load's phases to
// stderr as they change. It fails when the load fails (watchLoad's cause),
// the server stops, Ctrl-C arrives or ctx ends.
func waitLoaded(ctx context.Context, rt *troupe.Runtime, stderr io.Writer, intr <-chan os.Signal, served <-chan error) error {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan string, 1)
	settled := make(chan struct{})
	go func() { watchLoad(lctx, rt, failed); close(settled) }()
	fmt.Fprintf(stderr, "loading %s…\n", rt.Name())
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	shown := ""
	for {
		select {
		case cause := <-failed:
			return fmt.Errorf("the model failed to load: %s", cause)
		case <-settled:
			select {
			case cause := <-failed:
				return fmt.Errorf("the model failed to load: %s", cause)
			default:
			}
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped while loading the model: %w", err)
			}
			return nil
		case err := <-served:
			return fmt.Errorf("the loopback server stopped: %w", err)
		case <-intr:
			return errors.New("interrupted while loading the model")
		case <-tick.C:
			sctx, scancel := context.WithTimeout(lctx, time.Second)
			st, err := rt.Status(sctx)
			scancel()
			if err == nil && !st.Ready && st.Error == "" && st.Phase != "" && st.Phase != shown {
				fmt.Fprintf(stderr, "%s: %s…\n", rt.Name(), st.Phase)
				shown = st.Phase
			}
		}
	}
}

// isTerminal reports whether f is a terminal (an *os.File on one).
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// chatUsage prints chat's flags, less the testing ones (debug-*).
func chatUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, "usage: troupe chat [MODEL] [flags]        chat with a model loaded here (default: the built-in demo model)\n"+
		"       troupe chat --url URL [NAME] [flags] chat with a running OpenAI-compatible server\n\n"+
		"Type a message and Enter; \"\"\" begins and ends a multi-line message, a trailing \\\n"+
		"continues a line; /? lists the commands. Ctrl-C stops a reply, Ctrl-D or /bye exits.\n"+
		"With stdin not a terminal, each line (or block) is a message and only the replies\n"+
		"are printed; the first error ends the chat.\n\nflags:\n")
	shown := flag.NewFlagSet("chat", flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.HasPrefix(f.Name, "debug-") {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}
