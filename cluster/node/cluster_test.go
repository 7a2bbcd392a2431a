package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/troupe-ai/troupe/internal/childproc"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
)

// The multi-process test runs each member as a child process: this test
// binary re-executed with childEnv set (TestMain). A member killed with
// SIGKILL has to be a process of its own, and the pinned protoactor
// cluster has a data race of its own (remote.BlockList, see doc.go) that
// fails any test whose process hosts a member under -race; the parent
// reads the children's race reports instead and fails on any other race.
const (
	childEnv        = "TROUPE_NODE_CHILD"
	childPortEnv    = "TROUPE_NODE_PROVIDER_PORT"
	childPeersEnv   = "TROUPE_NODE_PEERS"
	childRefEnv     = "TROUPE_NODE_REFERENCE"
	childReportEnv  = "TROUPE_NODE_REPORT"
	childKillEnv    = "TROUPE_NODE_KILL"
	childOrphanEnv  = "TROUPE_NODE_ORPHAN" // the orphan's pid, then the file it writes once its job runs
	testRefresh     = 200 * time.Millisecond
	testQueryPeriod = 200 * time.Millisecond
)

func TestMain(m *testing.M) {
	role := os.Getenv(childEnv)
	if run, ok := childRoles[role]; ok {
		if err := run(); err != nil {
			fmt.Fprintln(os.Stderr, role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childRoles are the child processes' mains, by the role in childEnv.
var childRoles = map[string]func() error{"replica": runReplica, "gateway": runGateway, "orphan": runOrphan}

// testJob is the job both the replica (locally) and the gateway (across
// nodes) run: fixed prompt token ids (the demo model's byte tokenizer),
// greedy, so the two outputs must be equal.
func testJob(id string, maxTokens int32) *actors.PrefillJob {
	prompt := []int32{}
	for _, b := range []byte("<|im_start|>user\nHello, cluster!<|im_end|>\n<|im_start|>assistant\n") {
		prompt = append(prompt, int32(b))
	}
	return &actors.PrefillJob{RequestId: id, Prompt: prompt, MaxTokens: maxTokens,
		Sampling: &actors.SamplingParams{Temperature: 0}}
}

// output is a stream's tokens and how it ended.
type output struct {
	Tokens []int32 `json:"tokens"`
	Finish string  `json:"finish"`
	Error  string  `json:"error,omitempty"`
}

func collect(s *Stream) output {
	var out output
	for ev := range s.Events {
		if ev.HasToken {
			out.Tokens = append(out.Tokens, ev.Token)
		}
		if ev.FinishReason != "" {
			out.Finish, out.Error = ev.FinishReason, ev.Error
		}
	}
	return out
}

// replicaReport is what the replica child saw: the members, and testJob's
// output on its own SchedulerActor.
type replicaReport struct {
	Members int
	Output  output
}

// runReplica is the child: a replica member serving the demo model. Once
// the model is ready it runs testJob on its own SchedulerActor and writes
// the output to the reference file, then serves until it is killed or its
// stdin closes (the parent ended).
func runReplica() error {
	port, err := strconv.Atoi(os.Getenv(childPortEnv))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := Start(Config{ProviderPort: port, Peers: strings.Split(os.Getenv(childPeersEnv), ","),
		RefreshInterval: testRefresh, QueryInterval: testQueryPeriod, Logger: log,
		Model: &troupe.Options{Threads: 1, Preparers: 1, KVBudget: 64 << 20, Logger: log}})
	if err != nil {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, ok := n.View().Replica(n.ID()); ok {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the model did not become ready")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The replica sees the other members too.
	peers := len(strings.Split(os.Getenv(childPeersEnv), ","))
	waitFor(10*time.Second, func() bool { return len(n.View().Members) == peers })
	ref := replicaReport{Members: len(n.View().Members),
		Output: collect(n.Submit(context.Background(), n.Runtime().Pids().Scheduler, testJob("reference", 24)))}
	if err := writeJSON(os.Getenv(childRefEnv), ref); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	n.Close()
	return nil
}

// writeJSON writes v to path whole (a reader polling for path never sees
// half a file).
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

func readJSON(path string, v any) bool {
	b, err := os.ReadFile(path)
	return err == nil && json.Unmarshal(b, v) == nil
}

// waitFor polls cond every 5ms until it holds or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// report is what the gateway child saw; the parent asserts on it.
type report struct {
	StartMember, Join, Routable time.Duration
	Members                     int
	Replica                     Replica
	Replicas                    int
	Reference                   replicaReport
	Remote                      output
	RemoteTook                  time.Duration
	Stats                       *actors.SchedulerStats // after the cancelled job
	OrphanCancelled             time.Duration
	OrphanTokens                int64 // generated for the orphan after its gateway was killed
	Leave                       time.Duration
	StillRoutable               bool
	InFlight                    output
	InFlightEnd                 time.Duration
	// Failed says why the scenario stopped early.
	Failed string
}

// runGateway is the gateway child: a member with no model that runs the
// scenario against the replica (whose process it kills) and writes a
// report for the parent.
func runGateway() error {
	port, err := strconv.Atoi(os.Getenv(childPortEnv))
	if err != nil {
		return err
	}
	victim, err := strconv.Atoi(os.Getenv(childKillEnv))
	if err != nil {
		return err
	}
	var r report
	scenario(&r, port, victim)
	return writeJSON(os.Getenv(childReportEnv), &r)
}

func scenario(r *report, port, victim int) {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	began := time.Now()
	gw, err := Start(Config{ProviderPort: port, Peers: strings.Split(os.Getenv(childPeersEnv), ","),
		RefreshInterval: testRefresh, QueryInterval: testQueryPeriod, Logger: log})
	if err != nil {
		r.Failed = err.Error()
		return
	}
	started := time.Now()
	r.StartMember = started.Sub(began)

	// 1. Both members see each other.
	var replicaID string
	if !waitFor(10*time.Second, func() bool {
		for _, rep := range gw.View().Replicas {
			replicaID = rep.MemberID
		}
		return replicaID != "" && len(gw.View().Members) == 3
	}) {
		r.Failed = fmt.Sprintf("the replica and the orphan never joined (or the replica never became routable): %+v", gw.View())
		return
	}
	m, _ := gw.View().Member(replicaID)
	joined := m.Since
	r.Join = joined.Sub(began)
	r.Members = len(gw.View().Members)

	// 2. The replica becomes routable once its capability has arrived.
	if !waitFor(2*time.Minute, func() bool {
		var ok bool
		r.Replica, ok = gw.View().Replica(replicaID)
		return ok
	}) {
		r.Failed = fmt.Sprintf("the replica never became routable: view %+v", gw.View())
		return
	}
	r.Routable = r.Replica.Since.Sub(joined)
	r.Replicas = len(gw.View().Replicas)

	// 3. A PrefillJob crosses nodes; the TokenEvents come back.
	if !waitFor(time.Minute, func() bool { return readJSON(os.Getenv(childRefEnv), &r.Reference) }) {
		r.Failed = "the replica wrote no reference output"
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sent := time.Now()
	r.Remote = collect(gw.Submit(ctx, r.Replica.Endpoint, testJob("remote-1", 24)))
	r.RemoteTook = time.Since(sent)

	// CancelJob and StatsQuery cross too: a long job cancelled on the
	// gateway stops running on the replica.
	cancelled := gw.Submit(ctx, r.Replica.Endpoint, testJob("remote-cancelled", 3000))
	if ev, ok := <-cancelled.Events; !ok || ev.FinishReason != "" {
		r.Failed = fmt.Sprintf("the job to cancel ended at once: %+v", ev)
		return
	}
	cancelled.Cancel()
	if !waitFor(10*time.Second, func() bool {
		st, err := gw.SchedulerStats(ctx, r.Replica.Endpoint)
		r.Stats = st
		return err == nil && st.Running == 0 && st.Waiting == 0
	}) {
		r.Failed = fmt.Sprintf("the cancelled job still runs on the replica: %+v", r.Stats)
		return
	}

	// A gateway killed while its job runs: the replica cancels the job
	// once the member has left.
	orphan := strings.SplitN(os.Getenv(childOrphanEnv), ",", 2)
	orphanPid, _ := strconv.Atoi(orphan[0])
	if err := writeJSON(orphan[1]+".go", "go"); err != nil {
		r.Failed = err.Error()
		return
	}
	if !waitFor(time.Minute, func() bool { _, err := os.Stat(orphan[1]); return err == nil }) {
		r.Failed = "the orphan's job never started"
		return
	}
	before, err := gw.SchedulerStats(ctx, r.Replica.Endpoint)
	if err != nil || before.Running != 1 {
		r.Failed = fmt.Sprintf("the replica does not run the orphan's job: %+v %v", before, err)
		return
	}
	if err := syscall.Kill(orphanPid, syscall.SIGKILL); err != nil {
		r.Failed = err.Error()
		return
	}
	orphaned := time.Now()
	var after *actors.SchedulerStats
	if !waitFor(10*time.Second, func() bool {
		after, err = gw.SchedulerStats(ctx, r.Replica.Endpoint)
		return err == nil && after.Running == 0 && after.Waiting == 0
	}) {
		r.Failed = "the replica still runs the job of a gateway that was killed"
		return
	}
	r.OrphanCancelled = time.Since(orphaned)
	r.OrphanTokens = after.GeneratedTokens - before.GeneratedTokens

	// 4. SIGKILL the replica while a long job streams to the gateway.
	long := gw.Submit(ctx, r.Replica.Endpoint, testJob("remote-long", 3000))
	first, ok := <-long.Events
	if !ok || first.FinishReason != "" {
		r.Failed = fmt.Sprintf("the long job ended at once: %+v", first)
		return
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		r.Failed = err.Error()
		return
	}
	at := time.Now()
	ended := make(chan output, 1)
	go func() { ended <- collect(long) }()
	if !waitFor(10*time.Second, func() bool {
		_, ok := gw.View().Member(replicaID)
		return !ok
	}) {
		r.Failed = fmt.Sprintf("the killed replica is still a member: %+v", gw.View().Members)
		return
	}
	r.Leave = time.Since(at)
	_, r.StillRoutable = gw.View().Replica(replicaID)
	select {
	case r.InFlight = <-ended:
		r.InFlight.Tokens = append([]int32{first.Token}, r.InFlight.Tokens...)
		r.InFlightEnd = time.Since(at)
	case <-time.After(10 * time.Second):
		r.Failed = "the in-flight stream did not end after the replica left"
	}
}

// runOrphan is a second gateway: it starts a long job on the replica,
// says so with a file, and waits to be killed.
func runOrphan() error {
	port, err := strconv.Atoi(os.Getenv(childPortEnv))
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	n, err := Start(Config{ProviderPort: port, Peers: strings.Split(os.Getenv(childPeersEnv), ","),
		RefreshInterval: testRefresh, QueryInterval: testQueryPeriod, Logger: log})
	if err != nil {
		return err
	}
	var rep Replica
	if !waitFor(2*time.Minute, func() bool {
		v := n.View()
		if len(v.Replicas) == 0 {
			return false
		}
		rep = v.Replicas[0]
		return true
	}) {
		return errors.New("no replica became routable")
	}
	// The job starts when the gateway says so (it would be over before
	// the gateway gets to it otherwise).
	goPath := os.Getenv(childOrphanEnv) + ".go"
	if !waitFor(2*time.Minute, func() bool { _, err := os.Stat(goPath); return err == nil }) {
		return errors.New("the gateway never said go")
	}
	s := n.Submit(context.Background(), rep.Endpoint, testJob("orphan-long", 3000))
	if ev, ok := <-s.Events; !ok || ev.FinishReason != "" {
		return fmt.Errorf("the long job ended at once: %+v", ev)
	}
	if err := writeJSON(os.Getenv(childOrphanEnv), "started"); err != nil {
		return err
	}
	go func() {
		for range s.Events { // keep the stream flowing
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// child is a member process.
type child struct{ *childproc.Process }

func startChild(t *testing.T, role string, env ...string) *child {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
	return &child{childproc.Start(t, role, cmd, 10*time.Second, nil)}
}

// TestPrefillAcrossNodes: a gateway (no model) and a replica (the demo
// model), each a child process, form a cluster on loopback with the
// automanaged provider. The gateway sees the replica join, sees it become
// routable only once its CapabilityReady arrives, sends it a PrefillJob and
// gets back over remote exactly the tokens the replica produces locally;
// a long job is in flight when the replica is killed with SIGKILL, and the
// gateway sees the member leave and the stream end with an Unavailable
// error.
func TestPrefillAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	gwPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	repPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	orphanPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	peers := "127.0.0.1:" + strconv.Itoa(gwPort) + ",127.0.0.1:" + strconv.Itoa(repPort) + ",127.0.0.1:" + strconv.Itoa(orphanPort)
	dir := t.TempDir()
	refPath, reportPath, orphanPath := filepath.Join(dir, "reference.json"), filepath.Join(dir, "report.json"), filepath.Join(dir, "orphan.json")
	replica := startChild(t, "replica", childPortEnv+"="+strconv.Itoa(repPort), childPeersEnv+"="+peers,
		childRefEnv+"="+refPath)
	orphan := startChild(t, "orphan", childPortEnv+"="+strconv.Itoa(orphanPort), childPeersEnv+"="+peers,
		childOrphanEnv+"="+orphanPath)
	gateway := startChild(t, "gateway", childPortEnv+"="+strconv.Itoa(gwPort), childPeersEnv+"="+peers,
		childRefEnv+"="+refPath, childReportEnv+"="+reportPath, childKillEnv+"="+strconv.Itoa(replica.Cmd.Process.Pid),
		childOrphanEnv+"="+strconv.Itoa(orphan.Cmd.Process.Pid)+","+orphanPath)
	select {
	case <-gateway.Exited:
	case <-time.After(4 * time.Minute):
		t.Fatal("the gateway's scenario did not finish")
	}
	var r report
	if !readJSON(reportPath, &r) {
		t.Fatalf("the gateway wrote no report (exit: %v)", gateway.Cmd.ProcessState)
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	t.Logf("gateway member started in %v (the pinned StartMember sleeps a fixed 1s)", ms(r.StartMember))
	t.Logf("join: the gateway's provider reported the replica %v after the gateway's Start was called", ms(r.Join))
	t.Logf("routable: the replica's CapabilityReady arrived %v after it joined (model %q, snapshot_reuse %v)",
		ms(r.Routable), r.Replica.Model, r.Replica.SnapshotReuse)
	t.Logf("remote job: %d tokens, finish %q, in %v", len(r.Remote.Tokens), r.Remote.Finish, ms(r.RemoteTook))
	t.Logf("orphan: the replica cancelled the job of a gateway killed with SIGKILL %v after the kill (%d more tokens generated)",
		ms(r.OrphanCancelled), r.OrphanTokens)
	t.Logf("leave: the gateway saw the killed replica leave %v after SIGKILL (provider refresh %v); the in-flight job ended after %v: %q",
		ms(r.Leave), testRefresh, ms(r.InFlightEnd), r.InFlight.Error)
	if r.Failed != "" {
		t.Fatal(r.Failed)
	}
	if r.Members != 3 {
		t.Errorf("the gateway saw %d members, want 3", r.Members)
	}
	if r.Replica.Self || r.Replica.Model != "troupe-demo" || r.Replica.SnapshotReuse || r.Replica.Endpoint.GetAddress() != r.Replica.Address {
		t.Errorf("replica %+v: want the demo model (dense KV) on the other member", r.Replica)
	}
	if r.Replicas != 1 {
		t.Errorf("the gateway listed %d routable replicas, want 1 (it serves no model itself)", r.Replicas)
	}
	if r.Reference.Members != 3 {
		t.Errorf("the replica saw %d members, want 3", r.Reference.Members)
	}
	ref := r.Reference.Output
	if len(ref.Tokens) == 0 || ref.Finish == "error" {
		t.Errorf("the replica's local reference is %+v", ref)
	}
	if !slices.Equal(r.Remote.Tokens, ref.Tokens) || r.Remote.Finish != ref.Finish {
		t.Errorf("across nodes: %+v\nlocally on the replica: %+v", r.Remote, ref)
	}
	if r.Stats.GetGeneratedTokens() < int64(2*len(ref.Tokens)) {
		t.Errorf("the replica's stats over remote: %+v", r.Stats)
	}
	if r.OrphanTokens >= 2000 {
		t.Errorf("the orphan's job ran on for %d tokens after its gateway was killed: not cancelled", r.OrphanTokens)
	}
	if r.Leave > 5*time.Second {
		t.Errorf("the member's leave took %v to see", r.Leave)
	}
	if r.StillRoutable {
		t.Error("the killed replica was still routable after it left")
	}
	if r.InFlight.Finish != "error" {
		t.Errorf("the in-flight stream ended %q after %d tokens, want an error", r.InFlight.Finish, len(r.InFlight.Tokens))
	}
}
