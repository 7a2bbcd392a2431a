package http

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/http/anthropic"
	"github.com/troupe-ai/troupe/http/apierr"
	"github.com/troupe-ai/troupe/http/conns"
	"github.com/troupe-ai/troupe/http/openai"
	"github.com/troupe-ai/troupe/http/responses"
	"github.com/troupe-ai/troupe/http/turn"
	"github.com/troupe-ai/troupe/http/webui"
)

// Config configures the server.
type Config struct {
	// APIKeys, when non-empty, are the accepted bearer tokens. Each key is
	// its own tenant: its stored responses and its prompt-cache entries are
	// invisible to the other keys.
	APIKeys []string
	// AdminKey is the key POST /v1/cache/reset needs (it is accepted on
	// every other route too, as a tenant of its own). With APIKeys and no
	// AdminKey the reset is refused; with neither it is open.
	AdminKey string
	// BodyLimit caps request bodies in bytes; 0 means 8 MiB.
	BodyLimit int
	// MaxQueue is how many generation requests may wait beyond those
	// running; past it requests get 429. 0 means 64.
	MaxQueue int
	// Parallel is the runtime's running-sequence cap (for the queue bound).
	Parallel int
	// KeepAlive is the SSE keep-alive comment period; 0 means 2s.
	KeepAlive time.Duration
	// ResponsesTTL is how long stored Responses-API responses are kept for
	// GET and previous_response_id; 0 means 1 hour.
	ResponsesTTL time.Duration
	// ResponsesMax bounds the stored responses (oldest evicted first); 0
	// means 1024.
	ResponsesMax int
	// ResponsesMaxBytes bounds the stored responses' approximate size
	// (oldest evicted first); 0 means 256 MiB.
	ResponsesMaxBytes int64

	// Connection limits. Timeouts: 0 means the default, negative means
	// none.

	// ReadTimeout bounds reading one request, headers and body (a client
	// trickling its request is cut with 408); 0 means 30s.
	ReadTimeout time.Duration
	// WriteTimeout bounds writing one non-streamed response; 0 means 60s.
	// Streams are bounded per write by StreamStallTimeout instead.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request
	// for this long; 0 means 60s, negative ReadTimeout.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's headers (past it: 431); 0 means
	// 16 KiB.
	MaxHeaderBytes int
	// MaxConns caps open connections (more wait in the listen backlog); 0
	// derives it from the open file limit (conns.DefaultMaxConns). Applies
	// to Serve.
	MaxConns int
	// StreamStallTimeout cancels a stream whose client reads nothing for
	// this long (its generation stops, its queue slot frees); 0 means 30s.
	StreamStallTimeout time.Duration
	// StreamSendBuffer is a streaming connection's socket send buffer in
	// bytes, bounding what queues for a client that stops reading; 0 means
	// 32 KiB, negative the kernel's default.
	StreamSendBuffer int
	// PeerCheck is how often a non-streamed generation looks whether its
	// client closed the connection (then it is cancelled); 0 means 200ms,
	// negative never.
	PeerCheck time.Duration
	// Logger receives handler panics and connection-layer warnings; nil
	// discards them.
	Logger *slog.Logger
	// Cluster, on a cluster member, answers GET /v1/cluster with the
	// node's picture of the cluster (a JSON value); nil: the route answers
	// 404 (a single process).
	Cluster func(ctx context.Context) any
}

// Server is the HTTP front of one runtime.
type Server struct {
	App      *fiber.App
	rt       *troupe.Runtime
	cfg      Config
	log      *slog.Logger
	inflight atomic.Int64
	keys     []string // accepted keys (see acceptedKeys)
	tenants  []string // tenant of keys[i]
	// life is every generating request's parent context: cancelled with
	// turn.ErrShutdown at the shutdown deadline.
	life  context.Context
	abort context.CancelCauseFunc
	tr    *turn.Transport
	// served are the served models' handlers, rt's first (AddModel
	// appends); replaced, never modified.
	served atomic.Pointer[[]*modelAPI]
}

// modelAPI is one served model's handlers.
type modelAPI struct {
	rt   *troupe.Runtime
	chat *openai.API
	msgs *anthropic.API
	resp *responses.API
}

// orDefault is d for 0, none (0) for negative, else v.
func orDefault[T int | time.Duration](v, d T) T {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

// New builds the Fiber app.
func New(rt *troupe.Runtime, cfg Config) *Server {
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 8 << 20
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = 64
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 2 * time.Second
	}
	cfg.ReadTimeout = orDefault(cfg.ReadTimeout, 30*time.Second)
	cfg.WriteTimeout = orDefault(cfg.WriteTimeout, 60*time.Second)
	cfg.IdleTimeout = orDefault(cfg.IdleTimeout, 60*time.Second)
	cfg.MaxHeaderBytes = orDefault(cfg.MaxHeaderBytes, 16<<10)
	cfg.StreamStallTimeout = orDefault(cfg.StreamStallTimeout, 30*time.Second)
	cfg.StreamSendBuffer = orDefault(cfg.StreamSendBuffer, 32<<10)
	cfg.PeerCheck = orDefault(cfg.PeerCheck, 200*time.Millisecond)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	life, abort := context.WithCancelCause(context.Background())
	s := &Server{rt: rt, cfg: cfg, log: log, keys: acceptedKeys(cfg), life: life, abort: abort,
		tr: &turn.Transport{StallTimeout: cfg.StreamStallTimeout, SendBuffer: cfg.StreamSendBuffer, Log: log}}
	for _, k := range s.keys {
		s.tenants = append(s.tenants, tenantOf(k))
	}
	app := fiber.New(fiber.Config{
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		ReadBufferSize:        max(cfg.MaxHeaderBytes, 1024),
		DisableStartupMessage: true,
		ErrorHandler: func(c *fiber.Ctx, err error) error {
			status := fiber.StatusInternalServerError
			var fe *fiber.Error
			if errors.As(err, &fe) {
				status = fe.Code
			}
			msg := err.Error()
			switch status {
			case fiber.StatusRequestEntityTooLarge:
				msg = "request body too large (limit " + strconv.Itoa(cfg.BodyLimit) + " bytes)"
			case fiber.StatusRequestHeaderFieldsTooLarge:
				msg = "request headers too large (limit " + strconv.Itoa(max(cfg.MaxHeaderBytes, 1024)) + " bytes)"
			case fiber.StatusRequestTimeout:
				msg = "the request was not received within " + cfg.ReadTimeout.String()
			}
			return writeError(c, status, msg)
		},
	})
	app.Use(s.count, s.recoverPanic)
	app.Get("/health", s.health)
	app.Get("/ready", s.ready)
	metricsHandler := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(rt.Metrics().Registry, promhttp.HandlerOpts{}))
	app.Get("/metrics", func(c *fiber.Ctx) error { metricsHandler(c.Context()); return nil })
	v1 := app.Group("/v1", s.auth)
	v1.Get("/models", s.models)
	v1.Get("/cache/stats", s.cacheStats)
	v1.Get("/cluster", s.cluster)
	v1.Post("/cache/reset", s.admin, s.cacheReset)
	first := &modelAPI{rt: rt, chat: openai.New(rt, openai.Config{KeepAlive: cfg.KeepAlive}),
		msgs: anthropic.New(rt, anthropic.Config{KeepAlive: cfg.KeepAlive}),
		resp: responses.New(rt, responses.Config{KeepAlive: cfg.KeepAlive, StoreTTL: cfg.ResponsesTTL, StoreMax: cfg.ResponsesMax,
			StoreMaxBytes: cfg.ResponsesMaxBytes})}
	s.served.Store(&[]*modelAPI{first})
	chat := func(m *modelAPI) *openai.API { return m.chat }
	v1.Post("/chat/completions", s.admit, byModel(s, chat, (*openai.API).ChatCompletions))
	v1.Post("/chat/completions/input_tokens", byModel(s, chat, (*openai.API).ChatInputTokens))
	// Prompt inspection (llama.cpp- and vLLM-style routes).
	app.Post("/tokenize", s.auth, byModel(s, chat, (*openai.API).Tokenize))
	app.Post("/detokenize", s.auth, byModel(s, chat, (*openai.API).Detokenize))
	app.Post("/apply-template", s.auth, byModel(s, chat, (*openai.API).ApplyTemplate))
	v1.Post("/completions", s.admit, byModel(s, chat, (*openai.API).Completions))
	msgs := func(m *modelAPI) *anthropic.API { return m.msgs }
	v1.Post("/messages", s.admit, byModel(s, msgs, (*anthropic.API).Messages))
	v1.Post("/messages/count_tokens", byModel(s, msgs, (*anthropic.API).CountTokens))
	resp := func(m *modelAPI) *responses.API { return m.resp }
	v1.Post("/responses", s.admit, byModel(s, resp, (*responses.API).Create))
	v1.Post("/responses/input_tokens", byModel(s, resp, (*responses.API).InputTokens))
	// Stored responses are shared by the models (responses.API.For).
	v1.Get("/responses/:id", first.resp.Get)
	v1.Get("/responses/:id/input_items", first.resp.InputItems)
	v1.Delete("/responses/:id", first.resp.Delete)
	webui.Mount(app) // the chat page at / (no key: its API calls send one)
	s.App = app
	return s
}

// count records every request by route and status, and logs one line per
// request when its answer is complete (a stream's when it ends): method,
// route, status, duration and, for generations, prompt, cached and
// generated tokens, time to first token and finish reason. Probes
// (/health, /ready, /metrics) log at debug level.
func (s *Server) count(c *fiber.Ctx) error {
	start := time.Now()
	rec := &turn.Record{}
	c.SetUserContext(turn.WithRecord(c.UserContext(), rec))
	err := c.Next()
	status := c.Response().StatusCode()
	var fe *fiber.Error
	if err != nil && errors.As(err, &fe) {
		status = fe.Code
	}
	route := c.Route().Path
	if route == "" || route == "/" && c.Path() != "/" { // only the app's middleware ran: no route matched
		route = "unmatched"
	}
	s.rt.Metrics().Requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	level := slog.LevelInfo
	switch route {
	case "/health", "/ready", "/metrics":
		level = slog.LevelDebug
	}
	if !s.log.Enabled(context.Background(), level) {
		return err
	}
	method := strings.Clone(c.Method()) // fiber's strings live only as long as c
	logLine := func() {
		attrs := []slog.Attr{slog.String("method", method), slog.String("route", route), slog.Int("status", status),
			slog.Duration("duration", time.Since(start).Round(time.Microsecond))}
		if f := rec.Fields(); f.Generated {
			attrs = append(attrs, slog.Int("prompt_tokens", f.PromptTokens), slog.Int("cached_tokens", f.CachedTokens),
				slog.Int("generated_tokens", f.GeneratedTokens), slog.Duration("ttft", f.TTFT.Round(time.Microsecond)),
				slog.Duration("prepare", f.Prepare.Round(time.Microsecond)), slog.String("finish", f.Finish))
			if f.Err != "" {
				attrs = append(attrs, slog.String("error", f.Err))
			}
		}
		s.log.LogAttrs(context.Background(), level, "request", attrs...)
	}
	if turn.Streaming(c) {
		rec.OnStreamEnd(logLine) // the stream runs after this returns
	} else {
		logLine()
	}
	return err
}

// recoverPanic turns a handler's panic into a 500 in the route's error shape
// and a logged stack trace; the server serves on.
func (s *Server) recoverPanic(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in HTTP handler", "method", c.Method(), "path", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = writeError(c, fiber.StatusInternalServerError, "internal server error (logged on the server)")
		}
	}()
	return c.Next()
}

// isAnthropic reports whether c is on an Anthropic route, answered in
// Anthropic's error shape.
func isAnthropic(c *fiber.Ctx) bool { return strings.HasPrefix(c.Path(), "/v1/messages") }

// writeError answers in the error shape of the route's API.
func writeError(c *fiber.Ctx, status int, msg string) error {
	if isAnthropic(c) {
		return apierr.Anthropic(c, status, msg)
	}
	return apierr.OpenAI(c, status, msg, "")
}

// acceptedKeys are the keys auth accepts: the API keys, then the admin
// key. Without API keys the routes are open (the admin key then guards
// only the cache reset).
func acceptedKeys(cfg Config) []string {
	if len(cfg.APIKeys) == 0 {
		return nil
	}
	if cfg.AdminKey != "" {
		return append(slices.Clone(cfg.APIKeys), cfg.AdminKey)
	}
	return cfg.APIKeys
}

// tenantOf is the cache and store partition of an API key: a digest, so
// that the key itself is kept nowhere else.
func tenantOf(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:12])
}

// presentedKey is the key a request carries: Authorization with the
// Bearer scheme (OpenAI's clients; the scheme is case-insensitive, RFC
// 7235) or x-api-key (Anthropic's).
func presentedKey(c *fiber.Ctx) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(c.Get(fiber.HeaderAuthorization)), " ")
	if ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return c.Get("x-api-key")
}

// auth checks the API key when keys are configured, on every route, and
// records the key's tenant for the handlers (turn.Tenant).
func (s *Server) auth(c *fiber.Ctx) error {
	if len(s.keys) == 0 {
		return c.Next()
	}
	if key := presentedKey(c); key != "" {
		match := -1
		for i, k := range s.keys { // every key compared, in constant time
			if subtle.ConstantTimeCompare([]byte(key), []byte(k)) == 1 && match < 0 {
				match = i
			}
		}
		if match >= 0 {
			turn.SetTenant(c, s.tenants[match])
			return c.Next()
		}
	}
	return writeError(c, fiber.StatusUnauthorized, "invalid or missing API key (send Authorization: Bearer <key> or x-api-key: <key>)")
}

// admin guards the operations that act on every tenant (the cache reset):
// they need the admin key when keys are configured; without any key (local
// use) they are open.
func (s *Server) admin(c *fiber.Ctx) error {
	switch {
	case s.cfg.AdminKey != "":
		if subtle.ConstantTimeCompare([]byte(presentedKey(c)), []byte(s.cfg.AdminKey)) == 1 {
			return c.Next()
		}
		return apierr.OpenAI(c, fiber.StatusForbidden, "this operation needs the admin key (send Authorization: Bearer <admin key>)", "")
	case len(s.cfg.APIKeys) > 0:
		return apierr.OpenAI(c, fiber.StatusForbidden, "this operation needs an admin key, and none is configured: start the server with --admin-key <key> (or TROUPE_ADMIN_KEY) and send it as the bearer token", "")
	}
	return c.Next()
}

// admit bounds the generation requests in flight: running plus MaxQueue
// waiting. Past that the answer is 429 with Retry-After.
func (s *Server) admit(c *fiber.Ctx) error {
	turn.MarkArrival(c)
	limit := int64(s.cfg.Parallel + s.cfg.MaxQueue)
	if n := s.inflight.Add(1); n > limit {
		s.inflight.Add(-1)
		c.Set(fiber.HeaderRetryAfter, "1")
		return writeError(c, fiber.StatusTooManyRequests, "the server is at capacity ("+strconv.FormatInt(limit, 10)+" requests in flight); retry shortly")
	}
	// The request's lifetime: ended when its client leaves (watched while
	// the handler runs; a stream notices through its writes) or at the
	// shutdown deadline, and when its slot is released.
	// The request's access-log record (see count) rides along.
	life, end := context.WithCancelCause(turn.WithRecord(s.life, turn.RecordFrom(c.UserContext())))
	c.SetUserContext(life)
	turn.SetTransport(c, s.tr)
	// The further choices of an n > 1 request take a slot each.
	var extra atomic.Int64
	turn.SetClaim(c, func(k int) error {
		if s.inflight.Add(int64(k)) > limit {
			s.inflight.Add(-int64(k))
			return &actors.Overloaded{What: "sequences in flight, each choice of n counting as one", Limit: int(limit), RetryAfter: time.Second}
		}
		extra.Add(int64(k))
		return nil
	})
	// Streams finish after the handler returns; they release the slot
	// through the request context's done hook (see turn.SSE).
	turn.SetRelease(c, func() { s.inflight.Add(-1 - extra.Load()); end(nil) })
	defer turn.ReleaseIfNotStreaming(c)
	defer s.watchPeer(c.Context().Conn(), end)()
	return c.Next()
}

// watchPeer looks every PeerCheck whether the client of conn closed the
// connection, and then ends the request with turn.ErrClientGone; bytes the
// client sent ahead (a pipelined request) are only peeked, never
// consumed. The returned func stops the watch and waits for it.
func (s *Server) watchPeer(conn net.Conn, end context.CancelCauseFunc) (stop func()) {
	if conn == nil || s.cfg.PeerCheck <= 0 {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tk := time.NewTicker(s.cfg.PeerCheck)
		defer tk.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tk.C:
				if closed, ok := conns.PeerClosed(conn); !ok {
					return
				} else if closed {
					end(turn.ErrClientGone)
					return
				}
			}
		}
	}()
	return func() { close(quit); <-exited }
}

// health serves GET /health as llama-server does: 503 while the model loads
// and after a failed load, 200 once it is loaded. Unlike /ready it ignores
// the stall watchdog and the preparers, so a supervisor restarts only a
// process whose model cannot serve at all.
func (s *Server) health(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := s.rt.Status(ctx)
	switch {
	case err != nil:
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unknown", "error": err.Error()})
	case st.Error != "":
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "failed", "phase": st.Phase, "error": st.Error})
	case !st.Ready:
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "loading", "phase": st.Phase})
	}
	return c.JSON(fiber.Map{"status": "ok"})
}

func (s *Server) ready(c *fiber.Ctx) error {
	if stalled, waited := s.rt.Stalled(); stalled {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"ready": false, "phase": "stalled",
			"error": "the engine has not progressed for " + waited.Round(time.Second).String() + " with work queued"})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := s.rt.Status(ctx)
	if err != nil {
		return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"ready": false, "phase": "unknown", "error": err.Error()})
	}
	if !st.Ready {
		body := fiber.Map{"ready": false, "phase": st.Phase}
		if st.Error != "" {
			body["error"] = st.Error
		}
		return c.Status(fiber.StatusServiceUnavailable).JSON(body)
	}
	return c.JSON(fiber.Map{"ready": true, "phase": st.Phase})
}

// cluster serves GET /v1/cluster: the members, their models, capability,
// routability and load (Config.Cluster).
func (s *Server) cluster(c *fiber.Ctx) error {
	if s.cfg.Cluster == nil {
		return apierr.OpenAI(c, fiber.StatusNotFound, "this server is not a cluster member (serve --cluster-*)", "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.JSON(s.cfg.Cluster(ctx))
}

// cacheStats serves GET /v1/cache/stats: the prefix cache's counters, the
// KV pool's occupancy and the history-boundary switch in use
// (boundary_snapshots: auto or off).
func (s *Server) cacheStats(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.rt.SchedulerStats(ctx)
	if err != nil {
		return apierr.OpenAI(c, fiber.StatusServiceUnavailable, err.Error(), "")
	}
	return c.JSON(s.cacheJSON(st))
}

// cacheReset serves POST /v1/cache/reset.
func (s *Server) cacheReset(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := s.rt.ResetCache(ctx)
	if err != nil {
		return apierr.OpenAI(c, fiber.StatusServiceUnavailable, err.Error(), "")
	}
	return c.JSON(s.cacheJSON(st))
}

// cacheJSON is the answer of the cache routes: the scheduler's counters and
// the runtime's boundary-snapshot setting.
func (s *Server) cacheJSON(st *actors.SchedulerStats) fiber.Map {
	m := fiber.Map{
		"enabled": st.CacheEnabled, "kind": st.CacheKind, "boundary_snapshots": s.rt.BoundarySnapshots().String(),
		"pages_used": st.PagesUsed, "pages_free": st.PagesFree,
		"lookups": st.CacheLookups, "hits": st.CacheHits, "hit_tokens": st.CacheHitTokens,
		"cached_tokens": st.CachedTokens, "inserts": st.CacheInserts, "evictions": st.CacheEvictions,
		"warm_ups": st.WarmUps,
	}
	if st.CacheKind == "snapshot" {
		m["snapshots"] = st.SnapshotEntries
		m["bytes"], m["budget_bytes"] = st.SnapshotBytes, st.SnapshotBudget
		m["supersedes"] = st.SnapshotSupersedes
		m["misses"] = fiber.Map{"no_candidate": st.MissNoCandidate, "prefix_too_short": st.MissTooShort,
			"diverged": st.MissDiverged, "last_diverged_at_tokens": st.LastMissCommonTokens,
			"last_diverged_snapshot_tokens": st.LastMissSnapshotTokens}
	} else {
		m["cached_pages"], m["cached_positions"] = st.CachePages, st.CacheTokens
		m["pins"], m["pin_evictions"] = st.CachePins, st.CachePinEvictions
	}
	return m
}

// Serve serves HTTP on ln until Shutdown, under the connection cap
// (Config.MaxConns) and retrying accept errors that pass (out of file
// descriptors) instead of returning them.
func (s *Server) Serve(ln net.Listener) error {
	l := conns.NewListener(ln, s.cfg.MaxConns, s.log)
	s.log.Debug("connection cap", "max_conns", l.Cap())
	return s.App.Listener(l)
}

// abortGrace is how long requests cut at the shutdown deadline get to
// write their error and close.
const abortGrace = 5 * time.Second

// Shutdown stops accepting connections, closes idle keep-alive ones and
// waits up to timeout for in-flight requests (streams included). At the
// deadline the requests still running are cut: a stream ends with an error
// event in its API's shape, a non-streamed request answers 503; they get a
// few seconds to say so before Shutdown gives up on them.
func (s *Server) Shutdown(timeout time.Duration) error {
	defer s.abort(turn.ErrShutdown)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.App.ShutdownWithContext(ctx) }()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	select {
	case err := <-done:
		return err
	case <-deadline.C:
	}
	s.log.Warn("shutdown deadline reached: cutting the requests still in flight", "timeout", timeout, "in_flight", s.inflight.Load())
	s.abort(turn.ErrShutdown)
	grace := time.NewTimer(abortGrace)
	defer grace.Stop()
	select {
	case err := <-done:
		return err
	case <-grace.C:
		cancel()
		<-done
		return fmt.Errorf("shutdown: connections still open %v after the %v deadline", abortGrace, timeout)
	}
}
