// Package childproc runs a test's helper process (a cluster member: the
// pinned protoactor-go races inside every member, so no test process may
// host one under -race) and cleans up after it: at the end of the test the
// process is asked to stop, killed if it does not, its race reports are
// judged (racereport.Check), and its output is logged when the test failed.
package childproc

import (
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/internal/racereport"
	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// Process is a started child.
type Process struct {
	Name   string
	Cmd    *exec.Cmd
	Out    syncbuf.Buffer // stdout and stderr
	Stdin  io.WriteCloser // a pipe: closing it is how the tests' children are told to stop
	Exited chan struct{}  // closed once the process has exited (Cmd.ProcessState is then set)
}

// Start starts cmd as the process called name (Name may be changed until
// the test ends: the cleanup reports under it). At the end of the test,
// stop asks it to end (nil: close its stdin); past grace it is killed.
// Race reports in its output fail the test when they run through troupe's
// code or a frame containing one of also (racereport.Check).
func Start(t testing.TB, name string, cmd *exec.Cmd, grace time.Duration, stop func(*Process), also ...string) *Process {
	t.Helper()
	p := &Process{Name: name, Cmd: cmd, Exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.Out, &p.Out
	var err error
	if p.Stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(p.Exited) }()
	t.Cleanup(func() {
		if stop != nil {
			stop(p)
		} else {
			_ = p.Stdin.Close()
		}
		select {
		case <-p.Exited:
		case <-time.After(grace):
			_ = cmd.Process.Kill()
			<-p.Exited
		}
		racereport.Check(t, p.Name, p.Out.String(), also...)
		if t.Failed() {
			t.Logf("%s output:\n%s", p.Name, p.Out.String())
		}
	})
	return p
}
