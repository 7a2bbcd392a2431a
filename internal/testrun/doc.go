// Testrun is troupe's test command: it runs `go test -json`, prints what
// plain `go test` prints, and ends with one line saying how many parity tests
// were skipped because the shared fixtures are missing, where they were
// looked for and how to get them. Without that line a checkout without
// ../shared passes with every package `ok` and nobody learns that the parity
// suites did not run.
//
// Usage, from the repository root:
//
//	go tool testrun [-v] [-- go test flags and packages]
//
// With no arguments it runs
//
//	go test -json -race -count=1 ./... ./tests/...
//
// (go.work joins the root module and tests/). Arguments after the runner's
// own flags replace "-race -count=1 ./... ./tests/..." entirely; put them
// after "--" when the first one starts with "-":
//
//	go tool testrun -- -count=1 -run TestChat ./http/...
//	go tool testrun ./templates/
//
// The runner's flags:
//
//	-v  also list each test skipped for missing fixtures, before the summary
//
// `go run ./internal/testrun` works too, but `go run` turns every non-zero
// exit status into 1 and prints "exit status N" after the summary;
// `go tool` (the tool directive in go.mod) passes the status through.
//
// # What it prints
//
// The same as `go test` in package list mode (see `go help test`): for a
// passing package only its "ok" line, for a package without tests its "?"
// line, and for a failing package the test binary's output as a
// non-verbose run shows it: each failing test's "--- FAIL" line followed by
// its log, failing subtests nested and indented under their parent, panics,
// and output printed outside any test, then the package's "FAIL" line. Build
// and vet errors (test2json's "build-output" events) are printed as they
// arrive. A test that never finished (a timeout, a panic in another
// goroutine, an interrupt) is printed under its "=== RUN" line with
// everything it wrote, so the panic or timeout report always reaches the
// user. When any package failed, a last "FAIL" line follows, as with
// `go test`. When "-v" is among the go test arguments the whole verbose
// output of each package is printed instead.
//
// Output is printed a package at a time, when the package finishes, as
// `go test` does when it tests several packages; passing tests' output is
// dropped as soon as they pass, so memory holds only the running tests' logs
// and the failures.
//
// # Parity summary
//
// internal/fixtures starts the message of a test skipped for missing
// fixtures with fixtures.SkipMarker. A skipped test whose own output holds
// the marker is counted, and after everything else one line is printed:
//
//	parity: 41 tests skipped in 9 packages: fixtures not found at /src/shared/fixtures (set TROUPE_FIXTURES; see README "Fixtures")
//
// Nothing is printed when no test was skipped for fixtures: a run of a few
// packages may hold no parity test at all, so "all parity suites ran" could
// not be said truthfully. Under CI=true internal/fixtures fails those tests
// instead, and they show as ordinary failures.
//
// # Exit status, environment, signals
//
// The exit status is go test's (a go command killed by signal N gives
// 128+N). The go command runs in the current directory with the runner's
// environment. SIGINT and SIGTERM sent to the runner are forwarded to the go
// command, which then behaves as if it had received them itself, and the
// runner keeps reading until it exits. A terminal's Ctrl-C reaches the test
// binaries directly, as under plain go test; the output of the tests it
// interrupts is still shown.
package main
