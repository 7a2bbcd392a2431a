//go:build unix

package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-ai/troupe/internal/syncbuf"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// served is a server started through Server.Serve (the connection cap and
// accept retries) with its Server at hand for Shutdown.
type served struct {
	*server
	srv   *troupehttp.Server
	addr  string
	serve chan error
	logs  *syncbuf.Buffer
}

// serveT runs a runtime and its server on a loopback port through Serve;
// routes, when set, adds routes before serving.
func serveT(t *testing.T, cfg troupehttp.Config, routes func(app *fiber.App)) *served {
	t.Helper()
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	logs := &syncbuf.Buffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	rt, err := troupe.Start(context.Background(), troupe.Options{Parallel: cfg.Parallel, Threads: 1, KVBudget: 64 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := troupehttp.New(rt, cfg)
	if routes != nil {
		routes(srv.App)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &served{server: &server{rt: rt, url: "http://" + ln.Addr().String()}, srv: srv, addr: ln.Addr().String(),
		serve: make(chan error, 1), logs: logs}
	go func() { s.serve <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Shutdown(5 * time.Second)
		rt.Close()
	})
	s.waitReady(t)
	return s
}

// raw opens a plain TCP connection to the server; rcvbuf > 0 sets a tiny
// receive buffer before connecting.
func (s *served) raw(t *testing.T, rcvbuf int) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if rcvbuf > 0 {
		d.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	c, err := d.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func request(path, body string) string {
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, len(body), body)
}

// closedWithin reports whether the server closes c within d (reading and
// discarding whatever it answers first).
func closedWithin(c net.Conn, d time.Duration) (bool, string) {
	c.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(c)
	if err != nil { // the deadline: still open
		return false, string(got)
	}
	return true, string(got)
}

// waitIdle waits until the scheduler runs nothing and holds no KV pages,
// and returns the tokens generated since before.
func waitIdle(t *testing.T, rt *troupe.Runtime, before uint64, within time.Duration) uint64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		st, err := rt.SchedulerStats(context.Background())
		if err == nil && st.Running == 0 && st.PagesUsed == 0 {
			return uint64(st.GeneratedTokens) - before
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v later the scheduler still works: %+v", within, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func generated(t *testing.T, rt *troupe.Runtime) uint64 {
	t.Helper()
	st, err := rt.SchedulerStats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return uint64(st.GeneratedTokens)
}

// TestConnectionCap: with a cap of 3 connections, 10 clients that connect
// and send nothing do not stop the server: excess connections wait in the
// backlog, the read timeout frees the slots, and a real request is served.
func TestConnectionCap(t *testing.T) {
	s := serveT(t, troupehttp.Config{MaxConns: 3, ReadTimeout: 500 * time.Millisecond}, nil)
	for i := 0; i < 10; i++ {
		s.raw(t, 0)
	}
	client := &nethttp.Client{Timeout: 15 * time.Second}
	for i := 0; i < 3; i++ {
		resp, err := client.Get(s.url + "/health")
		if err != nil {
			t.Fatalf("request %d past the cap: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("request %d past the cap: %d", i, resp.StatusCode)
		}
	}
	select {
	case err := <-s.serve:
		t.Fatalf("the accept loop ended: %v", err)
	default:
	}
}

// TestOutOfDescriptors: when accept fails for want of file descriptors
// (EMFILE: here the connection cap is set above a lowered open file
// limit) the server backs off and retries instead of ending Serve, and
// serves again once descriptors are free.
func TestOutOfDescriptors(t *testing.T) {
	s := serveT(t, troupehttp.Config{MaxConns: 10000}, nil)
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Skip(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	low := rl
	low.Cur = uint64(len(fds) + 30)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				t.Error(err)
			}
		}
	}
	defer restore()
	// 25 client sockets leave the server a few descriptors to accept with.
	var clients []net.Conn
	for i := 0; i < 25; i++ {
		c, err := net.Dial("tcp", s.addr)
		if err != nil {
			break
		}
		clients = append(clients, c)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(s.logs.String(), "accept failed; retrying") {
		select {
		case err := <-s.serve:
			restore()
			t.Fatalf("Serve ended on EMFILE: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no accept failure with %d clients under a limit of %d:\n%s", len(clients), low.Cur, s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range clients {
		c.Close()
	}
	restore()
	select {
	case err := <-s.serve:
		t.Fatalf("Serve ended on EMFILE: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if code, body := s.get(t, "/health"); code != 200 {
		t.Fatalf("after the descriptors came back: %d %s", code, body)
	}
}

// TestReadTimeouts: a client that trickles its request headers (slowloris)
// and one that connects and sends nothing are cut after the read timeout; a
// keep-alive connection left idle after a request is closed after the idle
// timeout.
func TestReadTimeouts(t *testing.T) {
	s := serveT(t, troupehttp.Config{ReadTimeout: 500 * time.Millisecond, IdleTimeout: 300 * time.Millisecond}, nil)
	t.Run("slowloris", func(t *testing.T) {
		c := s.raw(t, 0)
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for _, b := range []byte(request("/v1/chat/completions", hello)) {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				if _, err := c.Write([]byte{b}); err != nil {
					return
				}
			}
		}()
		start := time.Now()
		closed, got := closedWithin(c, 3*time.Second)
		if !closed {
			t.Fatal("a trickling client kept its connection 3s under a 500ms read timeout")
		}
		if d := time.Since(start); d < 400*time.Millisecond {
			t.Fatalf("cut after %v, before the read timeout", d)
		}
		if got != "" && !strings.Contains(got, " 408 ") {
			t.Fatalf("answer to a timed-out request: %q", got)
		}
	})
	t.Run("silent", func(t *testing.T) {
		if closed, _ := closedWithin(s.raw(t, 0), 3*time.Second); !closed {
			t.Fatal("a silent connection stayed open 3s under a 500ms read timeout")
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := s.raw(t, 0)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("/health: %v %v", resp, err)
		}
		resp.Body.Close()
		if closed, _ := closedWithin(c, 3*time.Second); !closed {
			t.Fatal("an idle keep-alive connection stayed open 3s under a 300ms idle timeout")
		}
	})
}

// TestHeaderLimit: headers past the limit get 431 in OpenAI's error shape.
func TestHeaderLimit(t *testing.T) {
	s := serveT(t, troupehttp.Config{MaxHeaderBytes: 2048}, nil)
	resp, body := s.post(t, "/v1/chat/completions", hello, "X-Big", strings.Repeat("a", 4096))
	if resp.StatusCode != 431 || !strings.Contains(string(body), `"error"`) || !strings.Contains(string(body), "headers too large") {
		t.Fatalf("oversized headers: %d %s", resp.StatusCode, body)
	}
	if resp, body := s.post(t, "/v1/chat/completions", hello, "X-Small", strings.Repeat("a", 512)); resp.StatusCode != 200 {
		t.Fatalf("headers under the limit: %d %s", resp.StatusCode, body)
	}
}

// TestStalledStream: streams whose clients never read (tiny receive
// buffer) are cancelled within the stall timeout: their generation stops,
// their KV is freed and their queue slots take new requests.
func TestStalledStream(t *testing.T) {
	s := serveT(t, troupehttp.Config{Parallel: 1, MaxQueue: 1, StreamStallTimeout: 500 * time.Millisecond}, nil)
	before := generated(t, s.rt)
	long := `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":4000,"stream":true,"ignore_eos":true}`
	for i := 0; i < 2; i++ { // running + queued: the whole capacity
		c := s.raw(t, 1024)
		if _, err := io.WriteString(c, request("/v1/chat/completions", long)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 429 {
		t.Fatalf("with both slots held: %d %s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, body := s.post(t, "/v1/chat/completions", hello)
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 429 || time.Now().After(deadline) {
			t.Fatalf("20s after two clients stopped reading: %d %s", resp.StatusCode, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := waitIdle(t, s.rt, before, 5*time.Second); n >= 2*4000 {
		t.Fatalf("the stalled streams ran to their end (%d tokens)", n)
	}
}

// TestLongStreamOutlivesWriteTimeout: the write timeout bounds one
// non-streamed response, not a stream that keeps being read.
func TestLongStreamOutlivesWriteTimeout(t *testing.T) {
	s := serveT(t, troupehttp.Config{WriteTimeout: 100 * time.Millisecond}, nil)
	start := time.Now()
	resp, body := s.post(t, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":2000,"stream":true,"ignore_eos":true}`)
	if resp.StatusCode != 200 || !strings.HasSuffix(strings.TrimSpace(string(body)), "data: [DONE]") {
		t.Fatalf("a %v stream under a 100ms write timeout: %d ...%s", time.Since(start), resp.StatusCode, tail(body))
	}
}

func tail(b []byte) string {
	if len(b) > 300 {
		b = b[len(b)-300:]
	}
	return string(b)
}

// TestAbandonedRequest: a non-streamed generation whose client closes the
// connection is cancelled on every generating route: the generation stops
// well before its full length and its KV is freed.
func TestAbandonedRequest(t *testing.T) {
	s := serveT(t, troupehttp.Config{PeerCheck: 25 * time.Millisecond}, nil)
	// Anthropic's and the Responses API have no ignore_eos: their greedy
	// answer to "Please continue" on the demo model is about a thousand
	// tokens, measured first, and the client leaves sooner.
	for _, tc := range []struct {
		path, body string
		full       uint64 // the whole answer's tokens; 0: measure
		after      time.Duration
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":3000,"ignore_eos":true}`, 3000, 200 * time.Millisecond},
		{"/v1/completions", `{"prompt":"Go on","max_tokens":3000,"ignore_eos":true}`, 3000, 200 * time.Millisecond},
		{"/v1/responses", `{"input":"Please continue","max_output_tokens":4000,"temperature":0}`, 0, 60 * time.Millisecond},
		{"/v1/messages", `{"messages":[{"role":"user","content":"Please continue"}],"max_tokens":4000,"temperature":0}`, 0, 60 * time.Millisecond},
	} {
		t.Run(tc.path, func(t *testing.T) {
			before := generated(t, s.rt)
			full := tc.full
			if full == 0 {
				if resp, body := s.post(t, tc.path, tc.body); resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				full = generated(t, s.rt) - before
				if full < 500 {
					t.Skipf("the whole answer is only %d tokens", full)
				}
				before += full
			}
			c := s.raw(t, 0)
			if _, err := io.WriteString(c, request(tc.path, tc.body)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(tc.after)
			st, _ := s.rt.SchedulerStats(context.Background())
			if st.Running != 1 {
				t.Skipf("not generating %v in: %+v", tc.after, st)
			}
			c.Close()
			if n := waitIdle(t, s.rt, before, 2*time.Second); n >= full {
				t.Fatalf("the generation ran to its end (%d tokens) although the client left", n)
			}
		})
	}
	// Pipelined bytes are only looked at: a keep-alive client sending its
	// next request while the first generates gets both answers.
	c := s.raw(t, 0)
	first := `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":300,"ignore_eos":true}`
	io.WriteString(c, request("/v1/chat/completions", first))
	time.Sleep(300 * time.Millisecond)
	io.WriteString(c, request("/v1/chat/completions", hello))
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i, want := range []string{`"completion_tokens":300`, `"completion_tokens":`} {
		resp, err := nethttp.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("pipelined answer %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("pipelined answer %d: %d %s", i, resp.StatusCode, body)
		}
	}
}

// TestHandlerPanic: a panicking handler answers 500 in its route's error
// shape, its stack is logged, and the server serves on.
func TestHandlerPanic(t *testing.T) {
	boom := func(c *fiber.Ctx) error { panic("injected handler panic") }
	s := serveT(t, troupehttp.Config{}, func(app *fiber.App) {
		app.Post("/v1/boom", boom)
		app.Post("/v1/messages/boom", boom)
	})
	for _, tc := range []struct{ path, shape string }{
		{"/v1/boom", `"type":"server_error"`},
		{"/v1/messages/boom", `"type":"api_error"`},
	} {
		resp, body := s.post(t, tc.path, "{}")
		if resp.StatusCode != 500 || !strings.Contains(string(body), tc.shape) {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
	}
	if logs := s.logs.String(); !strings.Contains(logs, "injected handler panic") || !strings.Contains(logs, "transport_test.go") {
		t.Fatalf("the panic's stack was not logged:\n%s", logs)
	}
	if resp, body := s.post(t, "/v1/chat/completions", hello); resp.StatusCode != 200 {
		t.Fatalf("after the panics: %d %s", resp.StatusCode, body)
	}
}

// TestShutdown: idle keep-alive connections do not delay shutdown and a
// request in flight finishes; at the deadline every stream still running
// or queued ends with an error event in its API's shape and a non-streamed
// request answers 503 in its own.
func TestShutdown(t *testing.T) {
	type result struct {
		status int
		body   string
	}
	post := func(s *served, path, body string) <-chan result {
		ch := make(chan result, 1)
		go func() {
			resp, data := s.post(t, path, body)
			ch <- result{resp.StatusCode, string(data)}
		}()
		return ch
	}
	t.Run("graceful", func(t *testing.T) {
		s := serveT(t, troupehttp.Config{IdleTimeout: time.Minute}, nil)
		c := s.raw(t, 0)
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, err := nethttp.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("/health: %v", err)
		}
		inflight := post(s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":400,"ignore_eos":true}`)
		time.Sleep(50 * time.Millisecond)
		start := time.Now()
		if err := s.srv.Shutdown(10 * time.Second); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("an idle keep-alive connection delayed shutdown by %v", d)
		}
		if r := <-inflight; r.status != 200 || !strings.Contains(r.body, `"completion_tokens":400`) {
			t.Fatalf("the request in flight at shutdown: %d %s", r.status, r.body)
		}
		if err := <-s.serve; err != nil {
			t.Fatalf("Serve after Shutdown: %v", err)
		}
		if _, err := nethttp.Get(s.url + "/health"); err == nil {
			t.Fatal("a new connection was served after shutdown")
		}
	})
	t.Run("deadline", func(t *testing.T) {
		// Two long generations take both running slots; the Responses and
		// Messages streams wait in the queue behind them.
		s := serveT(t, troupehttp.Config{Parallel: 2}, nil)
		results := map[string]<-chan result{}
		results["/v1/chat/completions"] = post(s, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":4000,"stream":true,"ignore_eos":true}`)
		results["/v1/completions"] = post(s, "/v1/completions", `{"prompt":"Go on","max_tokens":4000,"ignore_eos":true}`)
		time.Sleep(200 * time.Millisecond)
		results["/v1/responses"] = post(s, "/v1/responses", `{"input":"Go on","max_output_tokens":4000,"stream":true,"temperature":0}`)
		results["/v1/messages"] = post(s, "/v1/messages", `{"messages":[{"role":"user","content":"Go on"}],"max_tokens":4000,"stream":true,"temperature":0}`)
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		if err := s.srv.Shutdown(300 * time.Millisecond); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
			t.Fatalf("Shutdown took %v with a 300ms deadline", d)
		}
		check := map[string]func(r result) bool{
			"/v1/chat/completions": func(r result) bool {
				ev := sse(r.body)
				return r.status == 200 && len(ev) >= 3 && ev[len(ev)-1] == "[DONE]" && strings.Contains(ev[len(ev)-2], `"type":"server_error"`) &&
					strings.Contains(ev[len(ev)-2], "shutting down")
			},
			"/v1/responses": func(r result) bool {
				return r.status == 200 && strings.Contains(r.body, "event: response.failed") && strings.Contains(r.body, "shutting down")
			},
			"/v1/messages": func(r result) bool {
				ev := sse(r.body)
				if r.status != 200 || len(ev) == 0 || !strings.Contains(r.body, "event: error") {
					return false
				}
				var last struct {
					Type  string
					Error struct{ Type, Message string }
				}
				return json.Unmarshal([]byte(ev[len(ev)-1]), &last) == nil && last.Type == "error" &&
					last.Error.Type == "api_error" && strings.Contains(last.Error.Message, "shutting down")
			},
			"/v1/completions": func(r result) bool {
				return r.status == 503 && strings.Contains(r.body, `"type":"server_error"`) && strings.Contains(r.body, "shutting down")
			},
		}
		for path, ch := range results {
			select {
			case r := <-ch:
				if !check[path](r) {
					t.Errorf("%s cut at the deadline: %d ...%s", path, r.status, tail([]byte(r.body)))
				}
			case <-time.After(5 * time.Second):
				t.Errorf("%s: no answer 5s after shutdown", path)
			}
		}
		waitIdle(t, s.rt, 0, 5*time.Second)
	})
}
