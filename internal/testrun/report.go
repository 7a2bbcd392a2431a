package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// event is one line of `go test -json`: cmd/test2json's TestEvent, plus
// ImportPath, which the build events that `go test -json` interleaves
// (Action "build-output" and "build-fail", as `go build -json` writes them)
// carry instead of Package.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// options says what the reporter prints beyond go test's own output.
type options struct {
	// verbose prints every package's whole output, as `go test -v` does.
	verbose bool
	// bench keeps a passing package's own output (benchmark results), as
	// `go test -bench` does.
	bench bool
	// listSkips lists each test skipped for missing fixtures.
	listSkips bool
}

// reporter turns a `go test -json` stream back into what `go test` prints,
// and counts the tests skipped for missing fixtures.
type reporter struct {
	w     *lineWriter
	opt   options
	pkgs  map[string]*pkgState
	order []string // packages in the order they started, for the end of a cut-off stream

	failed bool
	skips  []fixtureSkip
}

// fixtureSkip is one test skipped because fixtures were missing.
type fixtureSkip struct {
	pkg, test, reason string
}

// pkgState is a package whose tests are running.
type pkgState struct {
	name    string
	running map[string]*node
	top     []*node // top-level tests in start order
	items   []item  // package output and failed top-level tests, in order
	summary string  // go's own last line: "ok  \tpkg\t0.1s", "FAIL\tpkg ..."
	raw     strings.Builder
}

// node is one test or subtest.
type node struct {
	name   string
	parent *node
	depth  int
	header string  // its "--- FAIL: name (0.00s)" line
	items  []item  // its own output and its failed subtests, in order
	kids   []*node // its subtests in start order, while it runs
	done   bool
}

// item is a piece of output or a failed test, whose block goes there.
type item struct {
	text string
	node *node
}

func newReporter(w io.Writer, opt options) *reporter {
	return &reporter{w: &lineWriter{w: bufio.NewWriter(w), atLineStart: true}, opt: opt, pkgs: map[string]*pkgState{}}
}

// consume reads the whole stream. A line that is not a JSON event is
// printed as it is.
func (r *reporter) consume(in io.Reader) error {
	br := bufio.NewReader(in)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev event
			if line[0] == '{' && json.Unmarshal(line, &ev) == nil && ev.Action != "" {
				r.handle(ev)
			} else {
				r.w.text(string(line))
				r.w.flush()
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading go test output: %w", err)
		}
	}
}

// handle takes one event.
func (r *reporter) handle(ev event) {
	switch ev.Action {
	case "build-output":
		r.w.text(ev.Output)
		r.w.flush()
		return
	case "build-fail":
		return
	}
	if ev.Package == "" {
		r.w.text(ev.Output)
		return
	}
	p := r.pkgs[ev.Package]
	if p == nil {
		p = &pkgState{name: ev.Package, running: map[string]*node{}}
		r.pkgs[ev.Package] = p
		r.order = append(r.order, ev.Package)
	}
	if r.opt.verbose && ev.Action == "output" {
		p.raw.WriteString(ev.Output)
	}
	switch ev.Action {
	case "run":
		if ev.Test != "" {
			p.start(ev.Test)
		}
	case "output":
		if ev.Test == "" {
			p.output(ev.Output)
		} else {
			p.testOutput(ev.Test, ev.Output)
		}
	case "pass", "bench", "fail", "skip":
		if ev.Test == "" {
			r.endPackage(p, ev.Action)
			return
		}
		if n := p.end(ev.Test, ev.Action); n != nil && ev.Action == "skip" {
			if reason, ok := fixtureReason(n); ok {
				r.skips = append(r.skips, fixtureSkip{pkg: p.name, test: n.name, reason: reason})
			}
			n.items = nil
		}
	}
}

// start records a test that began running.
func (p *pkgState) start(name string) {
	n := &node{name: name}
	// A subtest's parent is the longest running test whose name, followed
	// by "/", starts its name (subtest names may hold "/" themselves).
	for i := strings.LastIndexByte(name, '/'); i > 0; i = strings.LastIndexByte(name[:i], '/') {
		if par := p.running[name[:i]]; par != nil {
			n.parent, n.depth = par, par.depth+1
			par.kids = append(par.kids, n)
			break
		}
	}
	if n.parent == nil {
		p.top = append(p.top, n)
	}
	p.running[name] = n
}

// output takes output that belongs to no test.
func (p *pkgState) output(s string) {
	if isSummary(s, p.name) {
		p.summary += s
		return
	}
	p.items = append(p.items, item{text: s})
}

// testOutput takes a test's output: framing lines (=== RUN and the like)
// are dropped, its result line becomes the head of its block.
func (p *pkgState) testOutput(name, s string) {
	n := p.running[name]
	if n == nil {
		// Output after the test's result (a goroutine it left behind):
		// it belongs to the package now.
		p.items = append(p.items, item{text: s})
		return
	}
	if isFraming(s, name) {
		return
	}
	if isResult(s, name) {
		n.header = strings.TrimLeft(s, " ")
		return
	}
	n.items = append(n.items, item{text: s})
}

// end records a test's result and returns it; a failed test is placed in
// its parent's output (or the package's), where `go test` prints it.
func (p *pkgState) end(name, action string) *node {
	n := p.running[name]
	if n == nil {
		return nil
	}
	delete(p.running, name)
	n.done = true
	n.kids = nil
	if action != "fail" {
		if action != "skip" {
			n.items = nil
		}
		return n
	}
	if n.parent != nil && !n.parent.done {
		n.parent.items = append(n.parent.items, item{node: n})
	} else {
		p.items = append(p.items, item{node: n})
	}
	return n
}

// endPackage prints a package that finished with the given action.
func (r *reporter) endPackage(p *pkgState, action string) {
	delete(r.pkgs, p.name)
	if action == "fail" {
		r.failed = true
	}
	switch {
	case r.opt.verbose:
		r.w.text(p.raw.String())
	case action == "fail":
		r.printFailed(p)
	default:
		if r.opt.bench && action == "pass" {
			for _, it := range p.items {
				if it.node == nil && it.text != "PASS\n" {
					r.w.text(it.text)
				}
			}
		}
		r.w.line(p.summary)
	}
	r.w.flush()
}

// printFailed prints a failed package as a non-verbose `go test` does:
// its failed tests and other output in order, then the tests that never
// finished (whatever ended the binary is in their output), then its last
// line.
func (r *reporter) printFailed(p *pkgState) {
	for _, it := range p.items {
		r.printItem(it, "")
	}
	for _, n := range p.top {
		if !n.done {
			r.printNode(n)
		}
	}
	if p.summary == "" {
		p.summary = "FAIL\t" + p.name + "\n"
	}
	r.w.line(p.summary)
}

func (r *reporter) printItem(it item, indent string) {
	if it.node != nil {
		r.printNode(it.node)
		return
	}
	r.w.indented(it.text, indent)
}

// printNode prints a failed or unfinished test's block: its result line
// (or "=== RUN" when it has none), then its output and failed subtests,
// each level indented four more spaces, as `go test` nests them.
func (r *reporter) printNode(n *node) {
	indent := strings.Repeat("    ", n.depth)
	head := n.header
	switch {
	case head != "":
	case !n.done:
		head = "=== RUN   " + n.name + "\n"
	default:
		head = "--- FAIL: " + n.name + "\n"
	}
	r.w.line(indent + head)
	for _, it := range n.items {
		r.printItem(it, indent)
	}
	if !n.done {
		for _, k := range n.kids {
			if !k.done {
				r.printNode(k)
			}
		}
	}
}

// finish prints what is left once the stream has ended: packages cut off
// before their result (an interrupted run), the final FAIL, and the
// parity summary.
func (r *reporter) finish() error {
	for _, name := range r.order {
		if p := r.pkgs[name]; p != nil {
			r.endPackage(p, "fail")
		}
	}
	if r.failed {
		r.w.line("FAIL\n")
	}
	r.printSkips()
	r.w.flush()
	return r.w.err
}

// printSkips prints the parity summary: the skipped tests with -v, then
// one line.
func (r *reporter) printSkips() {
	if len(r.skips) == 0 {
		return
	}
	type reason struct {
		text  string
		count int
	}
	var reasons []*reason
	byText := map[string]*reason{}
	pkgs := map[string]bool{}
	for _, s := range r.skips {
		pkgs[s.pkg] = true
		if byText[s.reason] == nil {
			byText[s.reason] = &reason{text: s.reason}
			reasons = append(reasons, byText[s.reason])
		}
		byText[s.reason].count++
	}
	if r.opt.listSkips {
		for _, s := range r.skips {
			if len(reasons) > 1 {
				r.w.line(fmt.Sprintf("parity: skipped %s %s: %s\n", s.pkg, s.test, s.reason))
			} else {
				r.w.line(fmt.Sprintf("parity: skipped %s %s\n", s.pkg, s.test))
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "parity: %s skipped in %s: ", plural(len(r.skips), "test"), plural(len(pkgs), "package"))
	const shown = 2
	if len(reasons) == 1 {
		b.WriteString(reasons[0].text)
	} else {
		for i, rs := range reasons[:min(shown, len(reasons))] {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s [%d]", rs.text, rs.count)
		}
		if len(reasons) > shown {
			fmt.Fprintf(&b, "; %d other missing fixtures", len(reasons)-shown)
			if !r.opt.listSkips {
				b.WriteString(" (-v lists them)")
			}
		}
	}
	fmt.Fprintf(&b, " (%s)\n", fixtures.Hint)
	r.w.line(b.String())
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fixtureReason finds fixtures.SkipMarker in a skipped test's own output
// and returns what the message says is missing.
func fixtureReason(n *node) (string, bool) {
	for _, it := range n.items {
		i := strings.Index(it.text, fixtures.SkipMarker)
		if i < 0 {
			continue
		}
		rest := it.text[i+len(fixtures.SkipMarker):]
		if j := strings.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		rest = strings.TrimSpace(rest)
		rest = strings.TrimSpace(strings.TrimSuffix(rest, "("+fixtures.Hint+")"))
		if rest == "" {
			rest = "fixtures missing"
		}
		return rest, true
	}
	return "", false
}

// isSummary reports whether s is the go command's last line for package
// pkg: "ok  \tpkg\t...", "FAIL\tpkg\t...", "FAIL\tpkg [build failed]",
// "?   \tpkg\t[no test files]".
func isSummary(s, pkg string) bool {
	for _, prefix := range []string{"ok  \t", "FAIL\t", "?   \t"} {
		rest, ok := strings.CutPrefix(s, prefix)
		if ok && strings.HasPrefix(rest, pkg) && len(rest) > len(pkg) && strings.ContainsRune("\t \n", rune(rest[len(pkg)])) {
			return true
		}
	}
	return false
}

// isFraming reports whether s is one of the lines the test binary writes
// in test2json mode to say which test runs ("=== RUN   name",
// "=== PAUSE", "=== CONT", "=== NAME"); go test shows them only with -v.
func isFraming(s, name string) bool {
	for _, verb := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME"} {
		if rest, ok := strings.CutPrefix(s, verb); ok && strings.TrimSpace(rest) == name {
			return true
		}
	}
	return false
}

// isResult reports whether s is test name's result line, e.g.
// "--- FAIL: TestX (0.00s)".
func isResult(s, name string) bool {
	s = strings.TrimLeft(s, " ")
	for _, verb := range []string{"--- FAIL: ", "--- PASS: ", "--- SKIP: ", "--- BENCH: "} {
		if strings.HasPrefix(s, verb+name+" (") {
			return true
		}
	}
	return false
}

// lineWriter writes output, remembering whether it stands at the start of
// a line, and keeps the first write error.
type lineWriter struct {
	w           *bufio.Writer
	atLineStart bool
	err         error
}

func (w *lineWriter) text(s string) {
	if s == "" || w.err != nil {
		return
	}
	if _, err := w.w.WriteString(s); err != nil {
		w.err = fmt.Errorf("writing output: %w", err)
		return
	}
	w.atLineStart = s[len(s)-1] == '\n'
}

// line writes s at the start of a line, ending an unfinished one first.
func (w *lineWriter) line(s string) {
	if s == "" {
		return
	}
	if !w.atLineStart {
		w.text("\n")
	}
	w.text(s)
}

// indented writes s, putting indent before each line that starts with
// four spaces (testing's indentation of a log line) so that a subtest's
// log sits under its result line, as in go test's non-verbose output.
// Other lines (a panic, a stack trace) are written as they are.
func (w *lineWriter) indented(s, indent string) {
	if indent == "" {
		w.text(s)
		return
	}
	for s != "" {
		piece := s
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			piece = s[:i+1]
		}
		s = s[len(piece):]
		if w.atLineStart && strings.HasPrefix(piece, "    ") {
			w.text(indent)
		}
		w.text(piece)
	}
}

func (w *lineWriter) flush() {
	if w.err != nil {
		return
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("writing output: %w", err)
	}
}
