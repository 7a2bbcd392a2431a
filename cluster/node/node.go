package node

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
)

// EndpointName is the name every node spawns its endpoint actor under, so a
// member's endpoint is the PID {member address, EndpointName}.
const EndpointName = "troupe-node"

// Config configures a node.
type Config struct {
	// ClusterName: members of different clusters ignore each other;
	// "" means "troupe".
	ClusterName string
	// Host and Port are where protoactor remote listens (gRPC); Port 0
	// picks a free port. Host "" means 127.0.0.1.
	Host string
	Port int
	// Advertise is the host:port other members reach this node at when it
	// differs from Host:Port (Host "0.0.0.0", NAT, containers); "" means
	// the listening address.
	Advertise string
	// Provider is the membership provider (--cluster-provider): "" or
	// ProviderAutomanaged (ProviderPort, Peers, RefreshInterval),
	// ProviderEtcd (Etcd) or ProviderK8s (in a pod; see provider.go).
	Provider string
	// Etcd configures the etcd provider.
	Etcd EtcdConfig
	// ProviderPort is the automanaged provider's HTTP health port (it
	// listens on all interfaces: the pinned provider has no bind option).
	ProviderPort int
	// Peers are the host:ProviderPort of every member, this one included
	// (--cluster-peers): the automanaged provider polls each of them.
	Peers []string
	// RefreshInterval is how often the provider polls the peers; a killed
	// member is seen leaving within about one interval. 0 means 1s.
	RefreshInterval time.Duration
	// QueryInterval is how often the node asks members whose capability
	// it has not seen yet for it; 0 means 500ms.
	QueryInterval time.Duration
	// PublishInterval is how often a replica publishes its load and the
	// changes of its cache digest to the other members (when something
	// changed, else at least every second); 0 means 250ms.
	PublishInterval time.Duration
	// DigestEntries bounds a replica's published digest (8 bytes an
	// entry, one per 16-token block or per snapshot); 0 means 4096.
	DigestEntries int
	// Model, when set, makes the node a replica that serves this model;
	// nil makes it a gateway (no model).
	Model *troupe.Options
	// Logger receives the node's logs (protoactor's from WARN up); nil
	// means slog.Default().
	Logger *slog.Logger
}

// Node is one member of a troupe cluster.
type Node struct {
	cfg      Config
	system   *actor.ActorSystem
	cluster  *cluster.Cluster
	endpoint *actor.PID
	rt       *troupe.Runtime // nil on a gateway
	sub      *eventstream.Subscription
	view     atomic.Pointer[View]
	selfID   atomic.Value // string: this member's id in the topology
	// digest records what this replica's prompt cache holds, for
	// publishing (nil on a gateway).
	digest *cacheDigest
	// published are the states the other replicas published (by member
	// id), guarded by pubMu.
	pubMu     sync.RWMutex
	published map[string]*publishedState
}

// Start joins the cluster and, for a replica, starts the model's pipeline.
// It returns once this member is started (the pinned cluster's StartMember
// waits a fixed second); other members are seen as the provider polls them.
func Start(cfg Config) (n *Node, err error) {
	if cfg.ClusterName == "" {
		cfg.ClusterName = "troupe"
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Second
	}
	cfg.nodeDefaults()
	log := cfg.Logger
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(minLevel{Handler: log.Handler(), min: slog.LevelWarn}).With("lib", "protoactor")
	}))
	provider, selfID, err := newProvider(&cfg, system)
	if err != nil {
		system.Shutdown()
		return nil, err
	}
	var ropts []remote.ConfigOption
	if cfg.Advertise != "" {
		ropts = append(ropts, remote.WithAdvertisedHost(cfg.Advertise))
	}
	rc := remote.Configure(cfg.Host, cfg.Port, ropts...)
	cc := cluster.Configure(cfg.ClusterName, provider, disthash.New(), rc)
	c := cluster.New(system, cc)
	n = &Node{cfg: cfg, system: system, cluster: c}
	if selfID != "" {
		n.selfID.Store(selfID)
	}
	n.view.Store(&View{})
	// Topology events are taken from before the member starts (its first
	// poll happens inside StartMember) and stamped as they come; they
	// wait for the endpoint actor, which can only be spawned later.
	fwd := &topologyForwarder{root: system.Root}
	n.sub = system.EventStream.Subscribe(fwd.publish)
	// The pipeline starts first, so the model loads while the member
	// joins; the capability gate keeps it unroutable until it is ready.
	local, err := n.spawnReplica()
	if err != nil {
		system.EventStream.Unsubscribe(n.sub)
		system.Shutdown()
		return nil, err
	}
	// The pinned StartMember panics where it fails (remote cannot
	// listen, provider fails to start).
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("cluster node: start member: %v", r)
			}
		}()
		c.StartMember()
	}()
	if err != nil {
		system.EventStream.Unsubscribe(n.sub)
		if n.rt != nil {
			n.rt.Close()
		}
		system.Shutdown()
		return nil, err
	}
	// The endpoint is spawned once remote has started: a PID spawned
	// before carries the placeholder address "nonhost", which remote
	// members cannot answer to. The endpoint is the only sender they
	// see; the pipeline behind it is only reached locally.
	n.endpoint, err = system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return newEndpoint(n, local)
	}), EndpointName)
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("cluster node: spawn endpoint: %w", err)
	}
	fwd.attach(n.endpoint)
	return n, nil
}

// nodeDefaults fills the settings Start and Attach share.
func (cfg *Config) nodeDefaults() {
	if cfg.QueryInterval <= 0 {
		cfg.QueryInterval = 500 * time.Millisecond
	}
	if cfg.PublishInterval <= 0 {
		cfg.PublishInterval = 250 * time.Millisecond
	}
	if cfg.DigestEntries <= 0 {
		cfg.DigestEntries = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
}

// spawnReplica starts the model's pipeline in the node's actor system when
// the node is a replica (cfg.Model; nil Pids on a gateway): request ids
// carry the member's id, and what the prompt cache takes in and serves
// feeds the digest the replica publishes.
func (n *Node) spawnReplica() (*actors.Pids, error) {
	if n.cfg.Model == nil {
		return nil, nil
	}
	// The member id before the runtime's request ids: a gateway's jobs
	// and this replica's own share its scheduler, which keys jobs by id.
	opts := *n.cfg.Model
	if opts.RequestIDPrefix == "" {
		opts.RequestIDPrefix = n.system.ID + "-"
	}
	n.digest = newCacheDigest(n.cfg.DigestEntries)
	if prev := opts.OnCached; prev != nil {
		opts.OnCached = func(scope string, tokens []int32, snapshot bool) {
			prev(scope, tokens, snapshot)
			n.digest.record(scope, tokens, snapshot)
		}
	} else {
		opts.OnCached = n.digest.record
	}
	rt, err := troupe.Spawn(n.system, opts)
	if err != nil {
		n.digest = nil
		return nil, err
	}
	n.rt = rt
	p := rt.Pids()
	return &p, nil
}

// topologyAt is a ClusterTopology event and when it was published.
type topologyAt struct {
	topology *cluster.ClusterTopology
	at       time.Time
}

// topologyForwarder hands the cluster's topology events to the endpoint
// actor, holding those that come before it exists.
type topologyForwarder struct {
	root     *actor.RootContext
	mu       sync.Mutex
	endpoint *actor.PID
	pending  []*topologyAt
}

func (f *topologyForwarder) publish(evt any) {
	t, ok := evt.(*cluster.ClusterTopology)
	if !ok {
		return
	}
	msg := &topologyAt{topology: t, at: time.Now()}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.endpoint == nil {
		f.pending = append(f.pending, msg)
		return
	}
	f.root.Send(f.endpoint, msg)
}

func (f *topologyForwarder) attach(endpoint *actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.endpoint = endpoint
	for _, msg := range f.pending {
		f.root.Send(endpoint, msg)
	}
	f.pending = nil
}

// ID is this member's id in the cluster, as the provider names it. The
// k8s provider draws its own: until its first topology lists this member,
// ID is the actor system's id (unique too, but no member's).
func (n *Node) ID() string {
	if id, ok := n.selfID.Load().(string); ok && id != "" {
		return id
	}
	return n.system.ID
}

// Address is this member's remote address (host:port).
func (n *Node) Address() string { return n.system.Address() }

// System is the node's actor system.
func (n *Node) System() *actor.ActorSystem { return n.system }

// Runtime is the replica's model pipeline; nil on a gateway.
func (n *Node) Runtime() *troupe.Runtime { return n.rt }

// Endpoint is this node's endpoint actor.
func (n *Node) Endpoint() *actor.PID { return n.endpoint }

// View is the node's current picture of the cluster: what it has seen of
// the members and of their capabilities. It is replaced, never changed.
func (n *Node) View() *View { return n.view.Load() }

// Drain makes a replica leave the routable set before it leaves the
// cluster: it tells every other member (Draining), so gateways route
// elsewhere, refuses new jobs as Unavailable (a gateway that had already
// picked it routes the job again), and returns once the jobs forwarded to
// it have ended, or with ctx's error when ctx ends first (Close then cuts
// the rest). On a gateway it returns at once. Close follows; the member
// stays in the cluster until then.
func (n *Node) Drain(ctx context.Context) error {
	done := make(chan struct{})
	timeout := 5 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(d), time.Millisecond)
	}
	if _, err := n.system.Root.RequestFuture(n.endpoint, &startDrain{done: done}, timeout).Result(); err != nil {
		return fmt.Errorf("cluster node: drain: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close leaves the cluster gracefully and stops the model's pipeline. The
// pinned cluster's graceful shutdown waits about two seconds.
func (n *Node) Close() {
	if n.sub != nil {
		n.system.EventStream.Unsubscribe(n.sub)
	}
	// Nothing of troupe's sends to other members once remote shuts down:
	// the pinned remote's shutdown flag is read by every remote send
	// without synchronisation.
	if n.endpoint != nil {
		_ = n.system.Root.StopFuture(n.endpoint).Wait()
	}
	if n.rt != nil {
		n.rt.Close()
	}
	n.cluster.Shutdown(true)
}

// FreePort returns a TCP port free on host now (for tests and tools that
// have to name the provider ports before the members start).
func FreePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(port)
}

// minLevel drops records below min (protoactor narrates at INFO).
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
