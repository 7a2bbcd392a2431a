package node

import (
	"context"
	"errors"
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
	return bareNodeTo(t, sys, local, nil)
}

// bareNodeTo is bareNode whose endpoint reaches the members named in peers
// (by member id) at those local actors, so what it sends them is seen.
func bareNodeTo(t *testing.T, sys *actor.ActorSystem, local *actors.Pids, peers map[string]*actor.PID) (*Node, *actor.PID) {
	t.Helper()
	n := &Node{cfg: Config{QueryInterval: time.Hour, Logger: sys.Logger()}, system: sys}
	n.view.Store(&View{})
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		e := newEndpoint(n, local)
		if peers != nil {
			e.pidOf = func(m *cluster.Member) *actor.PID {
				if p, ok := peers[m.Id]; ok {
					return p
				}
				return endpointOf(m)
			}
		}
		return e
	}), EndpointName)
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

// recorder is a local actor standing for a member's endpoint: it passes on
// what it receives.
func recorder(sys *actor.ActorSystem) (*actor.PID, chan any) {
	got := make(chan any, 64)
	return sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actors.CapabilityQuery, *actors.CapabilityReady, *actors.CapabilityUnknown, *actors.Draining:
			got <- m
		}
	})), got
}

// next is the next message of got, nil after a second.
func next(got chan any) any {
	select {
	case m := <-got:
		return m
	case <-time.After(time.Second):
		return nil
	}
}

// TestNoModelNotAskedAgain: a gateway answers a capability query saying it
// serves no model, and a member that said so (or that a replica said it
// is draining) is not asked again; a loading replica is, every tick. A
// draining replica leaves View.Replicas, and a late CapabilityReady does
// not bring it back.
func TestNoModelNotAskedAgain(t *testing.T) {
	sys := bareSystem(t)
	gwRec, gwGot := recorder(sys)
	rRec, rGot := recorder(sys)
	n, pid := bareNodeTo(t, sys, nil, map[string]*actor.PID{"gw2": gwRec, "r1": rRec})
	root := sys.Root
	self := &cluster.Member{Id: n.ID(), Host: "127.0.0.1", Port: 1}
	gw2 := &cluster.Member{Id: "gw2", Host: "10.0.0.2", Port: 4000}
	r1 := &cluster.Member{Id: "r1", Host: "10.0.0.1", Port: 4000}
	root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{self, gw2, r1}, Joined: []*cluster.Member{self, gw2, r1}})
	for name, got := range map[string]chan any{"gw2": gwGot, "r1": rGot} {
		if m := next(got); !isType[*actors.CapabilityQuery](m) {
			t.Fatalf("%s was sent %T on joining, want a CapabilityQuery", name, m)
		}
	}
	if st := n.View().ReplicaStates(); st[StateLoading] != 0 || st[StateRoutable] != 0 {
		t.Fatalf("replica states %v before any answer", st)
	}
	// This gateway, asked, says it serves no model, as its own sender.
	asker, asked := recorder(sys)
	root.RequestWithCustomSender(pid, &actors.CapabilityQuery{}, asker)
	if m, ok := next(asked).(*actors.CapabilityUnknown); !ok || !m.ServesNoModel {
		t.Fatalf("a gateway answered a query with %v, want CapabilityUnknown serving no model", m)
	}
	root.RequestWithCustomSender(pid, &actors.CapabilityUnknown{ServesNoModel: true}, actor.NewPID(gw2.Address(), EndpointName))
	root.RequestWithCustomSender(pid, &actors.CapabilityUnknown{}, actor.NewPID(r1.Address(), EndpointName))
	state := func(id string) MemberState { m, _ := n.View().Member(id); return m.State }
	if !waitFor(5*time.Second, func() bool { return state("gw2") == StateGateway && state("r1") == StateLoading }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if st := n.View().ReplicaStates(); st[StateLoading] != 1 || st[StateRoutable] != 0 || st[StateDraining] != 0 {
		t.Fatalf("replica states %v, want one loading", st)
	}
	if state(n.ID()) != StateGateway {
		t.Fatalf("the gateway lists itself as %q", state(n.ID()))
	}
	for i := 0; i < 3; i++ {
		root.Send(pid, &queryTick{})
		if m := next(rGot); !isType[*actors.CapabilityQuery](m) {
			t.Fatalf("tick %d: the loading replica was sent %T, want a CapabilityQuery", i, m)
		}
	}
	// The ticks went out with r1's queries: the gateway's would be in.
	if m := next(gwGot); m != nil {
		t.Fatalf("a member that serves no model was sent %T again", m)
	}

	// r1 ready, then draining.
	r1pid := actor.NewPID(r1.Address(), EndpointName)
	root.RequestWithCustomSender(pid, &actors.CapabilityReady{Model: "m"}, r1pid)
	if !waitFor(5*time.Second, func() bool { _, ok := n.View().Replica("r1"); return ok && state("r1") == StateRoutable }) {
		t.Fatal("r1 never became routable")
	}
	root.RequestWithCustomSender(pid, &actors.Draining{}, r1pid)
	if !waitFor(5*time.Second, func() bool { return state("r1") == StateDraining }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if len(n.View().Replicas) != 0 {
		t.Fatalf("a draining replica is routable: %+v", n.View().Replicas)
	}
	if st := n.View().ReplicaStates(); st[StateDraining] != 1 || st[StateRoutable] != 0 || st[StateLoading] != 0 {
		t.Fatalf("replica states %v, want one draining", st)
	}
	root.RequestWithCustomSender(pid, &actors.CapabilityReady{Model: "m"}, r1pid)
	root.Send(pid, &queryTick{})
	if m := next(rGot); m != nil {
		t.Fatalf("a draining replica was sent %T", m)
	}
	if _, ok := n.View().Replica("r1"); ok || state("r1") != StateDraining {
		t.Fatalf("a CapabilityReady after Draining made r1 %q", state("r1"))
	}
}

// finishJob makes the fake scheduler of TestReplicaDrain end its job.
type finishJob struct{}

// TestReplicaDrain: a draining replica tells the other members, lists
// itself as draining and not routable, answers queries with Draining,
// refuses new jobs as Unavailable (so a gateway routes them again), and
// Drain returns once the job it was running has ended.
func TestReplicaDrain(t *testing.T) {
	sys := bareSystem(t)
	model := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actors.CapabilityQuery); ok {
			c.Respond(&actors.CapabilityReady{Model: "m"})
		}
	}))
	started := make(chan string, 4)
	scheduler := sys.Root.Spawn(actor.PropsFromFunc(func() actor.ReceiveFunc {
		var requester *actor.PID
		var id string
		return func(c actor.Context) {
			switch m := c.Message().(type) {
			case *actors.PrefillJob:
				requester, id = c.Sender(), m.RequestId
				c.Send(requester, &actors.TokenEvent{RequestId: id, Token: 1, HasToken: true})
				started <- id
			case *finishJob:
				c.Send(requester, &actors.TokenEvent{RequestId: id, Token: 2, HasToken: true, FinishReason: "length"})
			}
		}
	}()))
	gwRec, gwGot := recorder(sys)
	n, pid := bareNodeTo(t, sys, &actors.Pids{Model: model, Scheduler: scheduler}, map[string]*actor.PID{"gw": gwRec})
	self := &cluster.Member{Id: n.ID(), Host: "127.0.0.1", Port: 1}
	gw := &cluster.Member{Id: "gw", Host: "10.0.0.1", Port: 4000}
	sys.Root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{self, gw}, Joined: []*cluster.Member{self, gw}})
	// Ready: the replica announces itself to the gateway.
	for m := next(gwGot); !isType[*actors.CapabilityReady](m); m = next(gwGot) {
		if m == nil {
			t.Fatal("the replica never announced its capability")
		}
	}
	if !waitFor(5*time.Second, func() bool { _, ok := n.View().Replica(n.ID()); return ok }) {
		t.Fatal("the replica never listed itself as routable")
	}

	long := n.Submit(context.Background(), pid, testJob("long", 2))
	if id := <-started; id != "long" {
		t.Fatalf("the scheduler started %q", id)
	}
	drained := make(chan error, 1)
	go func() { drained <- n.Drain(context.Background()) }()
	for m := next(gwGot); !isType[*actors.Draining](m); m = next(gwGot) {
		if m == nil {
			t.Fatal("the gateway was not told the replica drains")
		}
	}
	if !waitFor(5*time.Second, func() bool { m, _ := n.View().Member(n.ID()); return m.State == StateDraining }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if len(n.View().Replicas) != 0 {
		t.Fatalf("a draining replica lists itself routable: %+v", n.View().Replicas)
	}
	asker, asked := recorder(sys)
	sys.Root.RequestWithCustomSender(pid, &actors.CapabilityQuery{}, asker)
	if m := next(asked); !isType[*actors.Draining](m) {
		t.Fatalf("a draining replica answered a query with %T", m)
	}
	// A new job is refused, before any token, as Unavailable.
	refused := n.Submit(context.Background(), pid, testJob("late", 2))
	ev := <-refused.Events
	if ev.FinishReason != "error" || !ev.Unavailable || ev.HasToken || !strings.Contains(ev.Error, "draining") {
		t.Fatalf("a job sent to a draining replica got %+v", ev)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with a job running", err)
	case <-time.After(200 * time.Millisecond):
	}
	sys.Root.Send(scheduler, &finishJob{})
	if out := collect(long); len(out.Tokens) != 2 || out.Finish != "length" {
		t.Fatalf("the running job ended %+v, want its 2 tokens", out)
	}
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("Drain: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Drain did not return once the job had ended")
	}
	// Drained already: a second Drain returns at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.Drain(ctx); err != nil {
		t.Fatalf("a second Drain: %v", err)
	}
}

// TestDrainDeadline: Drain gives up with ctx's error while a job runs.
func TestDrainDeadline(t *testing.T) {
	sys := bareSystem(t)
	model := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actors.CapabilityQuery); ok {
			c.Respond(&actors.CapabilityReady{Model: "m"})
		}
	}))
	started := make(chan struct{}, 1)
	scheduler := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actors.PrefillJob); ok {
			started <- struct{}{} // and never ends
		}
	}))
	n, pid := bareNode(t, sys, &actors.Pids{Model: model, Scheduler: scheduler})
	s := n.Submit(context.Background(), pid, testJob("stuck", 2))
	defer s.Cancel()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := n.Drain(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Drain with a job that never ends: %v, want the deadline", err)
	}
}
