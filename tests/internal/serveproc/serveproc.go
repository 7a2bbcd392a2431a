// Package serveproc runs the real `troupe serve` command for the tests that
// talk to it as users do (tests/e2e, tests/load, tests/soak): it builds the
// binary, starts it on a free loopback port, waits for it, collects its log,
// and stops it with SIGINT when the test ends.
package serveproc

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// Build compiles ./cmd/troupe into dir and returns the binary's path. It
// runs from a package directory two levels below the repository root
// (tests/<name>), as go test does.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "troupe")
	build := exec.Command("go", "build", "-o", bin, "./cmd/troupe")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building troupe: %v\n%s", err, out)
	}
	return bin, nil
}

// Server is a running `troupe serve`.
type Server struct {
	URL  string
	Logs *syncbuf.Buffer
	done chan struct{}
}

// Start runs bin serve with args on a free loopback port (it adds --host
// and --port) and returns once the server answers HTTP (not necessarily
// ready). The test fails if the process exits first or does not listen
// within 30 s; at its end the server gets SIGINT and must stop within 10 s.
// The log is printed when the test failed.
func Start(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Logs: &syncbuf.Buffer{}, done: make(chan struct{})}
	// The pool is committed as it fills: suites start many servers, and
	// committing a default 1 GiB pool for each would only cost them time.
	cmd := exec.Command(bin, append([]string{"serve", "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--kv-prefault=false"}, args...)...)
	cmd.Stdout, cmd.Stderr = s.Logs, s.Logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			// SIGQUIT makes the Go runtime write every goroutine's stack
			// into the log before it exits: what the server was waiting on
			cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(2 * time.Second):
			}
			cmd.Process.Kill()
			<-s.done
			t.Errorf("troupe serve did not stop within 10s of SIGINT")
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.Logs.String())
		}
	})
	s.wait(t, "/health", 30*time.Second)
	return s
}

// WaitReady waits until /ready answers 200, failing the test after timeout
// or when the process exits.
func (s *Server) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	s.wait(t, "/ready", timeout)
}

func (s *Server) wait(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-s.done:
			t.Fatalf("troupe serve exited:\n%s", s.Logs.String())
		default:
		}
		if resp, err := http.Get(s.URL + path); err == nil {
			resp.Body.Close()
			if path == "/health" || resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
	t.Fatalf("troupe serve: no %s within %v:\n%s", path, timeout, s.Logs.String())
}

// Metric reads one sample of the server's /metrics by its name and labels
// as exposed (`troupe_running_sequences`,
// `troupe_history_renders_total{outcome="rendered"}`), failing the test
// when it is absent.
func (s *Server) Metric(t testing.TB, name string) float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no metric %s in /metrics", name)
	return 0
}
