package node

import (
	"context"
	"github.com/troupe-ai/troupe/internal/syncbuf"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/troupe-ai/troupe"
)

// The etcd test's children (TestMain runs runEtcdMember for them).
const (
	etcdMemberRole   = "etcd-member"
	childEtcdEnv     = "TROUPE_NODE_ETCD"         // the etcd endpoints
	childReplicaEnv  = "TROUPE_NODE_ETCD_REPLICA" // "1": serve the demo model
	childStatusEnv   = "TROUPE_NODE_STATUS"       // where the member writes its view
	etcdTestBasePath = "/troupe-test"
)

func init() { childRoles[etcdMemberRole] = runEtcdMember }

// memberStatus is a member's view as its child process writes it, each
// time it changes.
type memberStatus struct {
	ID       string
	Address  string
	Members  []string
	Selves   int // members of its view marked Self
	Replicas []string
	Updated  time.Time // when the endpoint published the view
}

// runEtcdMember is a member with the etcd provider that writes its view
// to a file whenever it changes, until its stdin closes.
func runEtcdMember() error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := Config{Provider: ProviderEtcd, QueryInterval: testQueryPeriod, Logger: log,
		Etcd: EtcdConfig{Endpoints: SplitList(os.Getenv(childEtcdEnv)), BasePath: etcdTestBasePath, DialTimeout: 5 * time.Second,
			Reannounce: time.Second}}
	if os.Getenv(childReplicaEnv) == "1" {
		cfg.Model = &troupe.Options{Threads: 1, Preparers: 1, KVBudget: 64 << 20, Logger: log}
	}
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	path := os.Getenv(childStatusEnv)
	var last *View
	for {
		select {
		case <-done:
			n.Close()
			return nil
		case <-time.After(5 * time.Millisecond):
		}
		v := n.View()
		if v == last {
			continue
		}
		last = v
		st := memberStatus{ID: n.ID(), Address: n.Address(), Updated: v.Updated}
		for _, m := range v.Members {
			st.Members = append(st.Members, m.ID)
			if m.Self {
				st.Selves++
			}
		}
		for _, r := range v.Replicas {
			st.Replicas = append(st.Replicas, r.MemberID)
		}
		if err := writeJSON(path, st); err != nil {
			return err
		}
	}
}

// startEtcd runs an etcd server on free loopback ports with its data in a
// temporary folder, and returns its client URL once it answers /health.
func startEtcd(t *testing.T) string {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no etcd binary on PATH, and CI=true: install it (apt-get install -y etcd-server): %v", err)
		}
		t.Skipf("no etcd binary on PATH (apt-get install -y etcd-server); skipping the etcd provider test: %v", err)
	}
	clientPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	peerPort, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	cmd := exec.Command(bin, "--name", "troupe-test", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "troupe-test="+peer, "--log-level", "warn")
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("etcd output:\n%s", out.String())
		}
	})
	if !waitFor(30*time.Second, func() bool {
		res, err := http.Get(client + "/health")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}) {
		t.Fatalf("etcd did not become healthy at %s:\n%s", client, out.String())
	}
	if v, err := exec.Command(bin, "--version").Output(); err == nil {
		t.Logf("%s", strings.SplitN(string(v), "\n", 2)[0])
	}
	return client
}

// TestEtcdProvider: a replica (the demo model) and two gateways, each a
// child process, find each other through a real etcd server; the
// gateways see the replica routable. The replica is killed with SIGKILL:
// its lease (EtcdLeaseTTL) expires and both gateways drop it. Then a
// gateway leaves gracefully and the other sees it go.
func TestEtcdProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	endpoint := startEtcd(t)
	dir := t.TempDir()
	status := func(name string) string { return filepath.Join(dir, name+".json") }
	member := func(name string, replica bool) *child {
		env := []string{childEtcdEnv + "=" + endpoint, childStatusEnv + "=" + status(name)}
		if replica {
			env = append(env, childReplicaEnv+"=1")
		}
		c := startChild(t, etcdMemberRole, env...)
		c.Name = name
		return c
	}
	replica := member("replica", true)
	gateways := []*child{member("gateway-1", false), member("gateway-2", false)}
	read := func(name string) (st memberStatus) {
		readJSON(status(name), &st)
		return st
	}
	// Every member sees all three, itself once; the replica is routable
	// on every member.
	names := []string{"replica", "gateway-1", "gateway-2"}
	if !waitFor(2*time.Minute, func() bool {
		rep := read("replica").ID
		for _, name := range names {
			st := read(name)
			if len(st.Members) != 3 || st.Selves != 1 || !slices.Equal(st.Replicas, []string{rep}) {
				return false
			}
		}
		return true
	}) {
		for _, name := range names {
			t.Logf("%s: %+v", name, read(name))
		}
		t.Fatal("the members did not all see each other and the routable replica through etcd")
	}
	victim := read("replica")
	for _, name := range names {
		st := read(name)
		if !slices.Contains(st.Members, st.ID) || !strings.HasPrefix(st.ID, "troupe@") {
			t.Errorf("%s: its id %q is not among its members %q in the provider's form troupe@<id>", name, st.ID, st.Members)
		}
	}

	// SIGKILL: nothing deregisters the replica; its lease expires.
	killed := time.Now()
	if err := syscall.Kill(replica.Cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-replica.Exited
	for _, name := range []string{"gateway-1", "gateway-2"} {
		var st memberStatus
		if !waitFor(EtcdLeaseTTL+5*time.Second, func() bool {
			st = read(name)
			return !slices.Contains(st.Members, victim.ID)
		}) {
			t.Fatalf("%s still lists the replica killed %v ago: %+v", name, time.Since(killed).Round(time.Millisecond), st)
		}
		took := st.Updated.Sub(killed)
		t.Logf("failure detection (etcd, lease TTL %v): %s dropped the replica killed with SIGKILL %v after the kill",
			EtcdLeaseTTL, name, took.Round(time.Millisecond))
		if took > EtcdLeaseTTL+time.Second {
			t.Errorf("%s took %v to drop the killed replica, past the lease TTL %v", name, took, EtcdLeaseTTL)
		}
		if len(st.Replicas) != 0 || len(st.Members) != 2 {
			t.Errorf("%s after the kill: %+v", name, st)
		}
	}

	// A graceful leave deletes the key at once.
	g2 := read("gateway-2").ID
	left := time.Now()
	_ = gateways[1].Stdin.Close()
	var st memberStatus
	if !waitFor(10*time.Second, func() bool {
		st = read("gateway-1")
		return !slices.Contains(st.Members, g2)
	}) {
		t.Fatalf("gateway-1 still lists gateway-2 %v after it was told to leave: %+v", time.Since(left), st)
	}
	t.Logf("graceful leave (etcd): gateway-1 dropped gateway-2 %v after it was told to close", st.Updated.Sub(left).Round(time.Millisecond))
	if len(st.Members) != 1 || st.Selves != 1 {
		t.Errorf("gateway-1 alone: %+v", st)
	}
	select {
	case <-gateways[1].Exited:
		// 66 is the race detector's exit status: its reports are judged
		// by childproc (racereport).
		code := gateways[1].Cmd.ProcessState.ExitCode()
		if code != 0 && !(code == 66 && strings.Contains(gateways[1].Out.String(), "WARNING: DATA RACE")) {
			t.Errorf("gateway-2 exited with %d", code)
		}
	case <-time.After(15 * time.Second):
		t.Error("gateway-2 did not exit after closing")
	}
}

// TestReannounce: reannounce puts a member's key again with its value and
// lease, so watchers see a Put; it leaves a deleted key deleted, and
// stops with the actor system.
func TestReannounce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs an etcd server")
	}
	endpoint := startEtcd(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	const key = "/troupe-test/troupe/troupe@member"
	if _, err := cli.Put(ctx, key, `{"id":"troupe@member"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	watch := cli.Watch(ctx, key)
	sys := actor.NewActorSystem()
	re, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { reannounce(sys, re, key, 100*time.Millisecond, slog.Default()); close(done) }()
	for i := 0; i < 2; i++ {
		select {
		case res := <-watch:
			if len(res.Events) != 1 {
				t.Fatalf("events %+v", res.Events)
			}
			ev := res.Events[0]
			if ev.Type != clientv3.EventTypePut || string(ev.Kv.Value) != `{"id":"troupe@member"}` || clientv3.LeaseID(ev.Kv.Lease) != lease.ID {
				t.Fatalf("re-announced %v %q lease %x, want a Put of the same value on lease %x", ev.Type, ev.Kv.Value, ev.Kv.Lease, lease.ID)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the key was not put again")
		}
	}
	// A member that left (its key deleted) stays gone.
	if _, err := cli.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if res, err := cli.Get(ctx, key); err != nil || len(res.Kvs) != 0 {
		t.Fatalf("after the delete: %v %v", res.Kvs, err)
	}
	sys.Shutdown()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("reannounce did not stop with the actor system")
	}
}
