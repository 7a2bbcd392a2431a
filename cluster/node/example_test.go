package node

import (
	"github.com/troupe-ai/troupe/internal/childproc"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// raceBuild is set when this test binary runs under the race detector
// (race_on_test.go).
var raceBuild bool

// exampleProcess is one member of examples/cluster, a process of its own.
type exampleProcess struct{ *childproc.Process }

func startExample(t *testing.T, bin, name string, args ...string) *exampleProcess {
	interrupt := func(p *childproc.Process) { _ = p.Cmd.Process.Signal(syscall.SIGINT) }
	return &exampleProcess{childproc.Start(t, name, exec.Command(bin, args...), 15*time.Second, interrupt, "examples/cluster/main.go")}
}

// exitedOK: the process exited 0, or, under the race detector, with its
// exit code for reported races (66), which childproc has judged (racereport): the
// pinned protoactor-go races with itself in every member.
func exitedOK(p *exampleProcess) bool {
	ps := p.Cmd.ProcessState
	return ps.Success() || (raceBuild && ps.ExitCode() == 66)
}

// TestClusterExample builds examples/cluster (a host program that owns its
// protoactor cluster and attaches troupe with Attach) and runs it as two
// processes on loopback: the gateway's host message reaches the replica's
// host actor and is answered, and its chat generation, routed to the
// replica, prints a completion.
func TestClusterExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a two-process example")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the example with")
	}
	bin := filepath.Join(t.TempDir(), "cluster-example")
	args := []string{"build", "-o", bin}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command(goCmd, append(args, "github.com/troupe-ai/troupe/examples/cluster")...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	repPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	gwPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	peers := "127.0.0.1:" + strconv.Itoa(repPort) + ",127.0.0.1:" + strconv.Itoa(gwPort)
	began := time.Now()
	replica := startExample(t, bin, "replica", "-role", "replica", "-provider-port", strconv.Itoa(repPort), "-peers", peers)
	// The gateway starts once the replica serves: the replica is then a
	// member before the gateway's cluster starts, and no topology change
	// follows, so the gateway knows it only from the topology Attach reads
	// from gossip.
	servedRe := regexp.MustCompile(`replica (\S+) serves troupe-demo at (\S+)\n`)
	if !waitFor(2*time.Minute, func() bool { return servedRe.MatchString(replica.Out.String()) }) {
		t.Fatal("the replica did not say it serves the demo model")
	}
	gateway := startExample(t, bin, "gateway", "-role", "gateway", "-provider-port", strconv.Itoa(gwPort), "-peers", peers,
		"-max-tokens", "16")
	select {
	case <-gateway.Exited:
	case <-time.After(3 * time.Minute):
		t.Fatal("the gateway did not finish")
	}
	t.Logf("gateway done %v after the processes started", time.Since(began).Round(time.Millisecond))
	if !exitedOK(gateway) {
		t.Fatalf("the gateway failed: %v", gateway.Cmd.ProcessState)
	}
	gwOut := gateway.Out.String()
	served := servedRe.FindStringSubmatch(replica.Out.String())
	if !strings.Contains(gwOut, "gateway ") || !strings.Contains(gwOut, ": replica "+served[1]+" is routable (troupe-demo)") {
		t.Errorf("the gateway did not route to replica %s", served[1])
	}
	// The host's own actor on the replica answered the gateway's host
	// message, and saw it come from the gateway's member.
	if !strings.Contains(gwOut, "host actor at "+served[2]+" answered: pong #1\n") {
		t.Errorf("no Pong from the replica's host actor at %s", served[2])
	}
	from := regexp.MustCompile(`host actor: ping from (\S+)\n`).FindStringSubmatch(replica.Out.String())
	if from == nil || from[1] == served[2] || !strings.HasPrefix(from[1], "127.0.0.1:") {
		t.Errorf("the replica's host actor saw no ping from the gateway's member: %v", from)
	}
	done := regexp.MustCompile(`completion \((\d+) tokens, finish (\w+);[^:]*: (".*")\n`).FindStringSubmatch(gwOut)
	if done == nil {
		t.Fatal("the gateway printed no completion")
	}
	tokens, _ := strconv.Atoi(done[1])
	if tokens == 0 || tokens > 16 || (done[2] != "length" && done[2] != "stop") {
		t.Errorf("completion of %s tokens, finish %s: want 1-16 tokens ending length or stop", done[1], done[2])
	}
	t.Logf("gateway printed: %s", strings.TrimSpace(done[0]))
	// The replica, interrupted, leaves cleanly.
	_ = replica.Cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-replica.Exited:
		if !exitedOK(replica) {
			t.Errorf("the replica exited %v", replica.Cmd.ProcessState)
		}
	case <-time.After(15 * time.Second):
		t.Error("the replica did not stop on SIGINT")
	}
	_ = os.Remove(bin)
}
