package peerbench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// LoadAvg reads the 1, 5 and 15 minute load averages ("0.52 0.61 0.70"),
// or "" where /proc/loadavg is missing.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// LoadMark is the load average at a named point of the run.
type LoadMark struct {
	At      string `json:"at"`
	LoadAvg string `json:"loadavg"`
	Time    string `json:"time"`
}

func mark(at string) LoadMark {
	return LoadMark{At: at, LoadAvg: LoadAvg(), Time: time.Now().UTC().Format(time.RFC3339)}
}

// runOutput runs a program to completion and returns its stdout; a failure
// carries the end of its stderr.
func runOutput(ctx context.Context, env []string, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(shorten(args), " "), err, tail(stderr.Bytes(), 800))
	}
	return stdout.Bytes(), nil
}

// shorten keeps long arguments (a 512-id prompt) readable in errors.
func shorten(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if len(a) > 60 {
			a = a[:40] + fmt.Sprintf("...(%d bytes)", len(a))
		}
		out[i] = a
	}
	return out
}

func tail(b []byte, n int) string {
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// server is a program started in the background with its output in a log file.
type server struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func startServer(name, logPath, bin string, args ...string) (*server, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%s: start %s: %w", name, bin, err)
	}
	s := &server{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		lf.Close()
		close(s.done)
	}()
	return s, nil
}

// waitReady polls url until it answers 200, the server exits, or the
// context or timeout ends.
func (s *server) waitReady(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.done:
			return fmt.Errorf("%s exited before it was ready (%v); see %s: %s", s.name, s.err, s.log, s.logTail())
		case <-ctx.Done():
			return fmt.Errorf("%s not ready at %s: %w; see %s", s.name, url, ctx.Err(), s.log)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log)
	return tail(b, 600)
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the exit.
func (s *server) stop(grace time.Duration) {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("free port: not a TCP address")
	}
	return addr.Port, nil
}
