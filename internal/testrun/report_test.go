package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the reporter's output (review the diff)")

// The streams in testdata were recorded with Go 1.26 from a throwaway
// module like the one run_test.go writes:
//
//	go test -json -count=1 -p 1 ./pass ./mainout ./notests > pass.jsonl
//
// and so on per case (-timeout 2s for timeout.jsonl; interrupted.jsonl is
// a run stopped with SIGINT to its process group, as Ctrl-C does). The
// .golden files hold what the reporter prints for them, checked line by
// line against plain `go test` on the same packages.
func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream string
		lines  int // keep only the first lines of the stream (a cut-off run)
		opt    options
	}{
		// Passing packages show only their "ok" line (test logs and
		// TestMain's output are dropped); no test files gives "?".
		{name: "pass", stream: "pass.jsonl"},
		// A failing test's block with its logs, the package's FAIL lines.
		{name: "fail", stream: "fail.jsonl"},
		// Nested failing subtests indented under their parents, logs
		// between them kept in order; parallel subtests.
		{name: "subtests", stream: "subtests.jsonl"},
		// Compile errors, vet errors and a missing import, each printed
		// once as it arrives, then the package lines.
		{name: "build", stream: "build.jsonl"},
		// A panic in a test, with its stack.
		{name: "panic", stream: "panic.jsonl"},
		// A test that timed out never reports a result: it is printed
		// under its "=== RUN" line with the timeout panic.
		{name: "timeout", stream: "timeout.jsonl"},
		// A goroutine left by a passed test panics during the next test.
		{name: "late", stream: "late.jsonl"},
		// Ctrl-C: the test binary dies of SIGINT.
		{name: "interrupted", stream: "interrupted.jsonl"},
		// The stream ends before the package's result (go test killed):
		// what is known is printed as a failure.
		{name: "cutoff", stream: "subtests.jsonl", lines: 20},
		// Fixture skips (with the marker, top-level and subtests, in two
		// packages) are counted; a skip without the marker, and a passing
		// test that merely logs the marker, are not.
		{name: "fixtures", stream: "fixtures.jsonl"},
		{name: "fixtures-list", stream: "fixtures.jsonl", opt: options{listSkips: true}},
		// go test -v: everything, as it came.
		{name: "verbose", stream: "fail.jsonl", opt: options{verbose: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", tc.stream))
			if err != nil {
				t.Fatal(err)
			}
			if tc.lines > 0 {
				ls := bytes.SplitAfter(in, []byte("\n"))
				in = bytes.Join(ls[:tc.lines], nil)
			}
			var out bytes.Buffer
			r := newReporter(&out, tc.opt)
			if err := r.consume(bytes.NewReader(in)); err != nil {
				t.Fatal(err)
			}
			if err := r.finish(); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != string(want) {
				t.Errorf("output differs from %s\n--- got:\n%s\n--- want:\n%s", golden, got, want)
			}
		})
	}
}

// TestReportSummary checks the parity line's counting and wording on
// hand-made streams.
func TestReportSummary(t *testing.T) {
	skip := func(pkg, test, msg string) string {
		return `{"Action":"run","Package":"` + pkg + `","Test":"` + test + `"}
{"Action":"output","Package":"` + pkg + `","Test":"` + test + `","Output":"    x_test.go:9: ` + msg + `\n"}
{"Action":"output","Package":"` + pkg + `","Test":"` + test + `","Output":"--- SKIP: ` + test + ` (0.00s)\n"}
{"Action":"skip","Package":"` + pkg + `","Test":"` + test + `"}
`
	}
	end := func(pkg string) string {
		return `{"Action":"output","Package":"` + pkg + `","Output":"ok  \t` + pkg + `\t0.01s\n"}
{"Action":"pass","Package":"` + pkg + `"}
`
	}
	const hint = ` (set TROUPE_FIXTURES; see README \"Fixtures\")`
	notFound := "[parity fixtures missing] fixtures not found at /f" + hint
	for _, tc := range []struct {
		name, stream, want string
	}{
		{
			name:   "none",
			stream: skip("a", "TestA", "needs a GPU") + end("a"),
			want:   "ok  \ta\t0.01s\n",
		},
		{
			name:   "one",
			stream: skip("a", "TestA", notFound) + end("a"),
			want:   "ok  \ta\t0.01s\nparity: 1 test skipped in 1 package: fixtures not found at /f" + " (set TROUPE_FIXTURES; see README \"Fixtures\")\n",
		},
		{
			name: "several packages",
			stream: skip("a", "TestA", notFound) + skip("a", "TestB", notFound) + end("a") +
				skip("b", "TestC", notFound) + end("b"),
			want: "ok  \ta\t0.01s\nok  \tb\t0.01s\nparity: 3 tests skipped in 2 packages: fixtures not found at /f (set TROUPE_FIXTURES; see README \"Fixtures\")\n",
		},
		{
			name: "several reasons",
			stream: skip("a", "TestA", "[parity fixtures missing] fixture missing: /f/x"+hint) +
				skip("a", "TestB", "[parity fixtures missing] fixture missing: /f/y"+hint) +
				skip("a", "TestC", "[parity fixtures missing] fixture missing: /f/y"+hint) +
				skip("a", "TestD", "[parity fixtures missing] fixture missing: /f/z"+hint) + end("a"),
			want: "ok  \ta\t0.01s\nparity: 4 tests skipped in 1 package: fixture missing: /f/x [1]; fixture missing: /f/y [2]; 1 other missing fixtures (-v lists them) (set TROUPE_FIXTURES; see README \"Fixtures\")\n",
		},
		{
			// A message without the hint (an older internal/fixtures)
			// is still counted, its text kept whole.
			name:   "no hint",
			stream: skip("a", "TestA", "[parity fixtures missing] fixtures not found at /f (set TROUPE_FIXTURES)") + end("a"),
			want:   "ok  \ta\t0.01s\nparity: 1 test skipped in 1 package: fixtures not found at /f (set TROUPE_FIXTURES) (set TROUPE_FIXTURES; see README \"Fixtures\")\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			r := newReporter(&out, options{})
			if err := r.consume(strings.NewReader(tc.stream)); err != nil {
				t.Fatal(err)
			}
			if err := r.finish(); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestHasFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
		want bool
	}{
		{[]string{"-v", "./..."}, "v", true},
		{[]string{"--v", "./..."}, "v", true},
		{[]string{"-test.v=true"}, "v", true},
		{[]string{"-v=false"}, "v", false},
		{[]string{"-run", "TestV", "./v/"}, "v", false},
		{[]string{"-vet=off"}, "v", false},
		{[]string{"-bench", ".", "-benchmem"}, "bench", true},
		{[]string{"-bench="}, "bench", false},
		{[]string{"-benchtime=1x"}, "bench", false},
		{[]string{"./...", "-args", "-v"}, "v", false},
	} {
		if got := hasFlag(tc.args, tc.name); got != tc.want {
			t.Errorf("hasFlag(%q, %q) = %v, want %v", tc.args, tc.name, got, tc.want)
		}
	}
}
