// Command cluster shows troupe added to a Proto.Actor cluster that a host
// program builds and owns: each process starts its own actor system and
// cluster member (automanaged provider), spawns a host actor of its own,
// and then attaches troupe with node.Attach, as a replica (serves the
// built-in demo model) or as a gateway (no weights; routes its jobs to a
// replica). The gateway asks the replica's host actor for a Pong, a host
// message across the nodes, then streams a chat answer generated on the
// replica. See README.md for the two commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/cluster/gateway"
	"github.com/troupe-ai/troupe/cluster/node"
	"github.com/troupe-ai/troupe/examples/cluster/hostpb"
	"github.com/troupe-ai/troupe/output"
	"github.com/troupe-ai/troupe/templates"
)

// hostActorName is the host's own actor, spawned on every member.
const hostActorName = "host-greeter"

func main() {
	role := flag.String("role", "", "replica or gateway")
	port := flag.Int("port", 0, "protoactor remote port (0: any free port)")
	providerPort := flag.Int("provider-port", 0, "this member's automanaged provider port (one of -peers)")
	peers := flag.String("peers", "", "every member's 127.0.0.1:provider-port, comma-separated")
	prompt := flag.String("prompt", "Say hello.", "the gateway's chat message")
	maxTokens := flag.Int("max-tokens", 24, "the gateway's completion length")
	wait := flag.Duration("wait", time.Minute, "how long the gateway waits for a routable replica")
	flag.Parse()
	if (*role != "replica" && *role != "gateway") || *providerPort == 0 || *peers == "" {
		flag.Usage()
		os.Exit(2)
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The host's cluster, built as any protoactor program builds one.
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	provider := automanaged.NewWithConfig(500*time.Millisecond, *providerPort, node.SplitList(*peers)...)
	c := cluster.New(system, cluster.Configure("example", provider, disthash.New(), remote.Configure("127.0.0.1", *port)))
	c.StartMember()
	defer c.Shutdown(true)

	// The host's own actor: it answers Ping, from any member.
	pings := int64(0)
	if _, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if p, ok := ctx.Message().(*hostpb.Ping); ok {
			pings++
			fmt.Printf("host actor: ping from %s\n", p.GetFrom())
			ctx.Respond(&hostpb.Pong{From: system.Address(), Count: pings})
		}
	}), hostActorName); err != nil {
		log.Fatal(err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *role == "replica" {
		err = replica(ctx, system, c, quiet)
	} else {
		err = gatewayRole(ctx, system, c, quiet, *prompt, *maxTokens, *wait)
	}
	if err != nil {
		log.Print(err)
		c.Shutdown(true)
		os.Exit(1)
	}
}

// replica attaches a troupe replica serving the demo model and serves
// until it is interrupted.
func replica(ctx context.Context, system *actor.ActorSystem, c *cluster.Cluster, log *slog.Logger) error {
	a, err := node.Attach(system, c, node.Config{Logger: log,
		Model: &troupe.Options{Threads: 1, Preparers: 1, KVBudget: 64 << 20, Logger: log}})
	if err != nil {
		return err
	}
	defer a.Close()
	for {
		if _, ok := a.View().Replica(a.ID()); ok {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Printf("replica %s serves %s at %s\n", a.ID(), a.Runtime().Name(), a.Address())
	<-ctx.Done()
	return nil
}

// gatewayRole attaches a troupe gateway, pings the replica's host actor,
// and generates one chat answer on the replica.
func gatewayRole(ctx context.Context, system *actor.ActorSystem, c *cluster.Cluster, log *slog.Logger,
	prompt string, maxTokens int, wait time.Duration) error {
	a, err := node.Attach(system, c, node.Config{Logger: log})
	if err != nil {
		return err
	}
	defer a.Close()
	// The runtime prepares requests from the model's assets (the demo
	// model's, built in) and dispatches every job through the gateway.
	g := gateway.New(gateway.NodeBackend{Node: a.Node}, gateway.Config{Logger: log})
	rt, err := troupe.Spawn(system, troupe.Options{NoWeights: true, Dispatcher: g, RequestIDPrefix: a.ID() + "-", Logger: log})
	if err != nil {
		return err
	}
	defer rt.Close()
	g.Attach(rt.Name(), rt.Metrics())
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go gateway.ShareCapability(sctx, a.Node, rt, 200*time.Millisecond)

	wctx, wcancel := context.WithTimeout(ctx, wait)
	defer wcancel()
	var rep node.Replica
	for rep.Endpoint == nil {
		if reps := a.View().Replicas; len(reps) > 0 {
			rep = reps[0]
			break
		}
		select {
		case <-wctx.Done():
			return errors.New("gateway: no replica became routable")
		case <-time.After(50 * time.Millisecond):
		}
	}
	fmt.Printf("gateway %s: replica %s is routable (%s)\n", a.ID(), rep.MemberID, rep.Model)

	// A host message to the host actor on the replica's member.
	res, err := system.Root.RequestFuture(actor.NewPID(rep.Address, hostActorName),
		&hostpb.Ping{From: system.Address()}, 5*time.Second).Result()
	if err != nil {
		return fmt.Errorf("gateway: the replica's host actor: %w", err)
	}
	pong, ok := res.(*hostpb.Pong)
	if !ok {
		return fmt.Errorf("gateway: the replica's host actor answered %T", res)
	}
	fmt.Printf("host actor at %s answered: pong #%d\n", pong.GetFrom(), pong.GetCount())

	// A chat generation through the troupe runtime, routed to the replica.
	msgs, err := templates.DecodeJSON([]byte(fmt.Sprintf(`[{"role": "user", "content": %q}]`, prompt)))
	if err != nil {
		return err
	}
	gctx, gcancel := context.WithTimeout(ctx, time.Minute)
	defer gcancel()
	stream, err := rt.Generate(gctx, &chat.Request{Messages: msgs.([]any), MaxTokens: maxTokens})
	if err != nil {
		return err
	}
	p := stream.Prepared
	out := output.New(p.Assets.Tokenizer, output.Options{Prompt: p.Prepared.Prompt, PromptIDs: p.Prepared.IDs})
	var text strings.Builder
	finish, tokens := "", 0
	for ev := range stream.Events {
		if ev.HasToken {
			tokens++
			text.WriteString(out.Add(ev.Token).Content)
		}
		if ev.FinishReason != "" {
			text.WriteString(out.Finish().Content)
			finish = ev.FinishReason
			if ev.FinishReason == "error" {
				return fmt.Errorf("gateway: generation failed: %s", ev.Error)
			}
		}
	}
	fmt.Printf("completion (%d tokens, finish %s; the demo model's words are noise): %q\n", tokens, finish, text.String())
	return nil
}
