package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// writeModule writes a throwaway module: a passing package, a failing one
// and one whose parity test skips the way internal/fixtures does when the
// fixtures are missing.
func writeModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-fixtures")
	files := map[string]string{
		"go.mod": "module example.com/throwaway\n\ngo 1.26.0\n",
		"good/good_test.go": `package good

import "testing"

func TestGood(t *testing.T) { t.Log("a passing test's log is not shown") }
`,
		"bad/bad_test.go": `package bad

import "testing"

func TestGood(t *testing.T) {}

func TestBad(t *testing.T) {
	t.Log("log before the failure")
	t.Errorf("want %d, got %d", 1, 2)
}
`,
		"parity/parity_test.go": `package parity

import "testing"

func TestParity(t *testing.T) {
	t.Skip(` + strconv.Quote(fixtures.SkipMarker+" fixtures not found at "+missing+" ("+fixtures.Hint+")") + `)
}

func TestOwnSkip(t *testing.T) { t.Skip("not a fixtures skip") }
`,
		"nothing/nothing.go": "package nothing\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// moduleEnv is the environment for go test in the throwaway module: this
// one, outside any workspace.
func moduleEnv() []string {
	return append(os.Environ(), "GOWORK=off", "GOFLAGS=")
}

// TestRunModule runs the runner on a throwaway module and checks what a
// user sees: go test's lines, the failure with its log, no framing noise,
// the parity line last, and go test's exit status.
func TestRunModule(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a throwaway module")
	}
	dir := writeModule(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var out, errOut bytes.Buffer
	code, err := run(ctx, config{
		Dir:    dir,
		Env:    moduleEnv(),
		Args:   []string{"-count=1", "-p=1", "./..."}, // -p=1: packages finish in order
		Stdout: &out,
		Stderr: &errOut,
	})
	if err != nil {
		t.Fatalf("run: %v (stderr: %s)", err, errOut.String())
	}
	if code != 1 {
		t.Errorf("exit status %d, want 1 (go test's, for a failing test)", code)
	}
	got := regexp.MustCompile(`\t\d+\.\d+s\n`).ReplaceAllString(out.String(), "\tTIME\n")
	want := `--- FAIL: TestBad (0.00s)
    bad_test.go:8: log before the failure
    bad_test.go:9: want 1, got 2
FAIL
FAIL	example.com/throwaway/bad	TIME
ok  	example.com/throwaway/good	TIME
?   	example.com/throwaway/nothing	[no test files]
ok  	example.com/throwaway/parity	TIME
FAIL
parity: 1 test skipped in 1 package: fixtures not found at ` + filepath.Join(dir, "no-fixtures") + ` (set TROUPE_FIXTURES; see README "Fixtures")
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s\nstderr:\n%s", got, want, errOut.String())
	}

	// Only passing packages: status 0, the parity line still printed.
	out.Reset()
	code, err = run(ctx, config{
		Dir:    dir,
		Env:    moduleEnv(),
		Args:   []string{"-count=1", "./good", "./parity"},
		Stdout: &out,
		Stderr: &errOut,
	})
	if err != nil || code != 0 {
		t.Fatalf("run on passing packages: status %d, %v\n%s%s", code, err, out.String(), errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "parity: 1 test skipped in 1 package: ") {
		t.Errorf("output on passing packages:\n%s", out.String())
	}

	// A go test usage error: go test's status (2) and its message on
	// stderr.
	out.Reset()
	errOut.Reset()
	code, err = run(ctx, config{
		Dir:    dir,
		Env:    moduleEnv(),
		Args:   []string{"-count=x", "./good"},
		Stdout: &out,
		Stderr: &errOut,
	})
	if err != nil || code != 2 || !strings.Contains(errOut.String(), "-count") {
		t.Errorf("bad flag: status %d, %v, stdout %q, stderr %q", code, err, out.String(), errOut.String())
	}
}

// TestRunForwardsSignal sends the runner an interrupt while go test runs
// a test that would pass: go test, receiving it, ends with a failure
// status, which the runner passes on.
func TestRunForwardsSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on a throwaway module")
	}
	dir := writeModule(t)
	started := filepath.Join(dir, "started")
	slow := `package slow

import (
	"os"
	"testing"
	"time"
)

func TestSlow(t *testing.T) {
	if err := os.WriteFile(` + strconv.Quote(started) + `, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
}
`
	if err := os.MkdirAll(filepath.Join(dir, "slow"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "slow", "slow_test.go"), []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sigs := make(chan os.Signal, 1)
	go func() {
		for {
			if _, err := os.Stat(started); err == nil {
				sigs <- os.Interrupt
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	var out, errOut bytes.Buffer
	code, err := run(ctx, config{
		Dir:     dir,
		Env:     moduleEnv(),
		Args:    []string{"-count=1", "./slow"},
		Stdout:  &out,
		Stderr:  &errOut,
		Signals: sigs,
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if code == 0 {
		t.Errorf("exit status 0 after an interrupt; output:\n%s%s", out.String(), errOut.String())
	}
}
