package node

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"

	"github.com/troupe-ai/troupe/actors"
)

// bareNode is a Node on an actor system without remote or cluster: the
// endpoint actor's logic is tested by feeding it the messages the cluster
// and the other members would send.
func bareNode(t *testing.T, sys *actor.ActorSystem, local *actors.Pids) (*Node, *actor.PID) {
	t.Helper()
	n := &Node{cfg: Config{QueryInterval: time.Hour, Logger: sys.Logger()}, system: sys}
	n.view.Store(&View{})
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return newEndpoint(n, local) }), EndpointName)
	if err != nil {
		t.Fatal(err)
	}
	n.endpoint = pid
	return n, pid
}

func bareSystem(t *testing.T) *actor.ActorSystem {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys
}

// TestGatewayGate: a member is routable only once its CapabilityReady has
// arrived from its own address, and stops being routable when it leaves.
func TestGatewayGate(t *testing.T) {
	n, pid := bareNode(t, bareSystem(t), nil)
	root := n.system.Root
	self := &cluster.Member{Id: n.ID(), Host: "127.0.0.1", Port: 1}
	r1 := &cluster.Member{Id: "r1", Host: "10.0.0.1", Port: 4000}
	root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{self, r1}, Joined: []*cluster.Member{self, r1}})
	if !waitFor(5*time.Second, func() bool { return len(n.View().Members) == 2 }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if len(n.View().Replicas) != 0 {
		t.Fatalf("a member whose capability is unknown is routable: %+v", n.View().Replicas)
	}
	// From an address that is no member: ignored. Then from r1's.
	root.RequestWithCustomSender(pid, &actors.CapabilityReady{Model: "x"}, actor.NewPID("10.0.0.9:4000", EndpointName))
	root.RequestWithCustomSender(pid, &actors.CapabilityReady{Model: "m", SnapshotReuse: true}, actor.NewPID(r1.Address(), EndpointName))
	if !waitFor(5*time.Second, func() bool { return len(n.View().Replicas) > 0 }) {
		t.Fatal("r1 never became routable")
	}
	v := n.View()
	rep, ok := v.Replica("r1")
	if len(v.Replicas) != 1 || !ok || rep.Model != "m" || !rep.SnapshotReuse || rep.Self ||
		rep.Endpoint.Address != r1.Address() || rep.Endpoint.Id != EndpointName {
		t.Fatalf("replicas %+v", v.Replicas)
	}
	// r1 leaves: no longer routable.
	root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{self}, Left: []*cluster.Member{r1}})
	if !waitFor(5*time.Second, func() bool { return len(n.View().Members) == 1 }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if len(n.View().Replicas) != 0 {
		t.Fatalf("a member that left is routable: %+v", n.View().Replicas)
	}
	// A gateway serves no model: a job sent to it ends at once.
	out := collect(n.Submit(context.Background(), pid, testJob("j", 4)))
	if out.Finish != "error" || !strings.Contains(out.Error, "serves no model") {
		t.Fatalf("a job at a gateway: %+v", out)
	}
}

// TestReplicaEndpoint: a replica announces its capability only once its
// ModelActor reports it, answers queries with it (as the sender, which
// names the replica), lists itself as routable, hands jobs to the
// SchedulerActor with the requester as the sender, so the TokenEvents go
// straight back, and cancels the jobs of a requester that goes away.
func TestReplicaEndpoint(t *testing.T) {
	sys := bareSystem(t)
	ready := make(chan struct{})
	model := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actors.CapabilityQuery); ok {
			select {
			case <-ready:
				c.Respond(&actors.CapabilityReady{Model: "m"})
			default:
				c.Respond(&actors.CapabilityUnknown{})
			}
		}
	}))
	cancels := make(chan string, 16)
	scheduler := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actors.PrefillJob:
			if m.RequestId == "orphan" {
				cancels <- "started " + m.RequestId
				return // runs until cancelled
			}
			c.Send(c.Sender(), &actors.TokenEvent{RequestId: m.RequestId, Token: 7, HasToken: true})
			c.Send(c.Sender(), &actors.TokenEvent{RequestId: m.RequestId, Token: 8, HasToken: true, FinishReason: "length"})
		case *actors.CancelJob:
			cancels <- "cancelled " + m.RequestId
		}
	}))
	// A "gateway" that records what the replica's endpoint sends it.
	got := make(chan any, 16)
	gateway := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actors.CapabilityReady, *actors.CapabilityUnknown:
			got <- m
			got <- c.Sender()
		}
	}))
	n, pid := bareNode(t, sys, &actors.Pids{Model: model, Scheduler: scheduler})
	gwMember := &cluster.Member{Id: "gw", Host: "10.0.0.1", Port: 4000}
	sys.Root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{{Id: n.ID(), Host: "127.0.0.1", Port: 1}, gwMember}})

	// Loading: queries are answered CapabilityUnknown; not routable.
	sys.Root.RequestWithCustomSender(pid, &actors.CapabilityQuery{}, gateway)
	if m := <-got; !isType[*actors.CapabilityUnknown](m) {
		t.Fatalf("while loading the endpoint answered %T", m)
	}
	if from := (<-got).(*actor.PID); !from.Equal(pid) {
		t.Fatalf("the answer's sender is %v, want the endpoint %v", from, pid)
	}
	time.Sleep(3 * localPoll)
	if len(n.View().Replicas) != 0 {
		t.Fatalf("routable while loading: %+v", n.View().Replicas)
	}

	// Ready: listed as routable (itself), and queries get the capability.
	close(ready)
	if !waitFor(5*time.Second, func() bool { _, ok := n.View().Replica(n.ID()); return ok }) {
		t.Fatal("the replica never listed itself as routable")
	}
	if rep, _ := n.View().Replica(n.ID()); !rep.Self || rep.Model != "m" || !rep.Endpoint.Equal(pid) {
		t.Fatalf("the replica lists itself as %+v", rep)
	}
	sys.Root.RequestWithCustomSender(pid, &actors.CapabilityQuery{}, gateway)
	if m := <-got; !isType[*actors.CapabilityReady](m) {
		t.Fatalf("once ready the endpoint answered %T", m)
	}
	if from := (<-got).(*actor.PID); !from.Equal(pid) {
		t.Fatalf("the answer's sender is %v, want the endpoint %v", from, pid)
	}

	// A job is forwarded with its requester: the events come straight back.
	out := collect(n.Submit(context.Background(), pid, testJob("j", 2)))
	if len(out.Tokens) != 2 || out.Tokens[0] != 7 || out.Tokens[1] != 8 || out.Finish != "length" {
		t.Fatalf("a job through the replica's endpoint: %+v", out)
	}
	// Its requester stopped after the last event: the endpoint cancels
	// the job, which the scheduler ignores for a finished one.
	if got := <-cancels; got != "cancelled j" {
		t.Fatalf("after a finished job the scheduler got %q", got)
	}

	// A requester that goes away mid-job (its member left, it crashed)
	// gets its job cancelled.
	requester := sys.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	sys.Root.RequestWithCustomSender(pid, testJob("orphan", 100), requester)
	if got := <-cancels; got != "started orphan" {
		t.Fatalf("the scheduler got %q", got)
	}
	sys.Root.Stop(requester)
	select {
	case got := <-cancels:
		if got != "cancelled orphan" {
			t.Fatalf("after the requester stopped the scheduler got %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the orphaned job was not cancelled")
	}
}

func isType[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// TestStartBusyPort: a member whose remote port is taken fails to start
// with an error (the pinned StartMember panics).
func TestStartBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busy := l.Addr().(*net.TCPAddr).Port
	pp, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(Config{Port: busy, ProviderPort: pp, Peers: []string{"127.0.0.1:" + strconv.Itoa(pp)}, Logger: quiet})
	if err == nil {
		n.Close()
		t.Fatal("a member started on a busy port")
	}
	if !strings.Contains(err.Error(), "listen") {
		t.Errorf("error %q does not say why", err)
	}
	if _, err := Start(Config{Logger: quiet}); err == nil {
		t.Error("a member started without a provider port and peers")
	}
}

// TestLoneMemberAdvertise: a member alone in its cluster lists itself, at
// the address it advertises rather than the one it listens on.
func TestLoneMemberAdvertise(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster member (its shutdown takes seconds)")
	}
	pp, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	advertise := "localhost:" + strconv.Itoa(port)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(Config{Host: "0.0.0.0", Port: port, Advertise: advertise, ProviderPort: pp,
		Peers: []string{"127.0.0.1:" + strconv.Itoa(pp)}, RefreshInterval: 100 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Address() != advertise {
		t.Errorf("address %q, want %q", n.Address(), advertise)
	}
	if !waitFor(5*time.Second, func() bool { return len(n.View().Members) == 1 }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if m := n.View().Members[0]; !m.Self || m.ID != n.ID() || m.Address != advertise || m.Since.IsZero() {
		t.Errorf("the lone member lists itself as %+v", m)
	}
	if len(n.View().Replicas) != 0 {
		t.Errorf("a gateway lists replicas: %+v", n.View().Replicas)
	}
}
