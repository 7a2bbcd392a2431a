// Package node makes a troupe process a member of a Proto.Actor cluster
// (DESIGN.md §8): replicas serve a model, gateways (no model) prepare
// requests and send each PrefillJob to a replica, whose SchedulerActor
// streams the TokenEvents straight back. Only protobuf messages of package
// actors cross nodes; KV never does.
//
// # Shape
//
// Every node runs one endpoint actor under the well-known name
// EndpointName, so a member's endpoint is the PID {member address,
// "troupe-node"}: nothing has to be looked up or placed. The endpoint
//
//   - keeps the node's View of the cluster: the members, from the cluster
//     provider's ClusterTopology events, and the routable replicas among
//     them, from their CapabilityReady announcements;
//   - on a replica, asks the local ModelActor for the capability
//     (CapabilityQuery) until the model is ready, then announces it to
//     every other member, to members that join later, and to any member
//     that asks (a CapabilityQuery answered by a Request, so that the
//     answer's sender names the replica);
//   - asks every member whose capability it has not seen yet, when it
//     joins and every Config.QueryInterval after, so neither start-up
//     order nor a lost message leaves a replica unseen. A gateway answers
//     such a query once with CapabilityUnknown{serves_no_model}, a
//     draining replica with Draining, and neither is asked again (gateways
//     used to be asked by every other member twice a second, for good);
//     a loading replica answers CapabilityUnknown and is asked again.
//     View.Members carries what each member is (MemberState: unknown,
//     loading, routable, draining, gateway);
//   - on a replica, drains (Node.Drain, serve on SIGTERM/SIGINT): it
//     tells every member Draining, which takes it out of their
//     View.Replicas at once (it leaves the routable set before the
//     cluster), refuses new jobs with an Unavailable error before any
//     token (a gateway that had already picked it routes the job again),
//     and Drain returns once the jobs forwarded to it have ended, bounded
//     by the caller's deadline (serve's --shutdown-timeout); the member
//     then leaves with Close;
//   - on a replica, hands PrefillJob, CancelJob, StatsQuery and CacheProbe
//     to the local SchedulerActor with Forward, which keeps the original
//     sender: the scheduler answers (and streams TokenEvents to) the
//     gateway's per-job actor directly over remote, as it does for a
//     local requester. The extra hop is one in-process mailbox. The
//     endpoint watches each job's requester: when it stops, or its member
//     leaves the cluster (a gateway killed mid-stream), the replica
//     cancels its jobs instead of generating for nobody. Request ids must
//     therefore be unique across gateways (the scheduler keys jobs by id).
//
// The capability gate holds across nodes: a member is in View.Replicas only
// once its CapabilityReady has reached this node from the member's own
// address, and leaves it when the provider reports the member gone. A
// router (package cluster/route) picks among View.Replicas; a View is
// immutable and swapped atomically, so reading it per request costs no
// message. Node.Submit sends a job to a replica's Endpoint and returns its
// TokenEvents; it watches the endpoint, so a job in flight on a replica
// that is killed ends with an "error" event (Unavailable) as soon as the
// provider reports the member gone, instead of hanging.
//
// # Why a well-known endpoint and not a cluster kind (grain)
//
// Proto.Actor's virtual actors are placed by the identity lookup
// (disthash: rendezvous hashing over the members that host the kind), so
// the cluster, not troupe, would choose which member a job's actor lives
// on. A replica's SchedulerActor is not placeable: it exists where the
// model is loaded, one per loaded model, and routing must pick the replica
// by prefix affinity and load. So the scheduler stays an ordinary actor
// reachable by a remote PID whose address comes from the member list.
// The cluster is used for membership (provider, member list, topology
// events, blocking of members that left) and remote for transport.
//
// # Why direct messages for the capability, not pub-sub or gossip state
//
// Cluster pub-sub delivers only to subscribers present at publication (a
// gateway that joins later would still have to ask), and its topic actor
// is itself a grain placed on some member, which may be the replica that
// dies. Gossip state (Gossiper.SetState) would spread per-member data, but
// it is the part of the pinned cluster with the data races below, and it
// says nothing about which actor to talk to. A CapabilityReady sent by the
// replica's endpoint names that endpoint (its sender) and arrives in one
// hop; the query on join and every QueryInterval makes it order-proof.
//
// # Replica state: published by each replica to each member
//
// A replica's load and a digest of what its prompt cache holds
// (publish.go) go the same way, for the same reasons: its endpoint sends a
// ReplicaState to every other member each Config.PublishInterval (250 ms)
// when something changed, and at least every second. The digest
// (route.Digest, Config.DigestEntries entries, least recently used
// dropped first) is fed by the engine (troupe.Options.OnCached) with every
// prefix the prompt cache takes in or serves; a state carries the entries
// added and dropped since the previous one, numbered, so a member applies
// it only in sequence and otherwise asks for a full state
// (ReplicaStateResync). New members get a full state at once, all members
// every 40 periods. Members hold the states by replica (Node.Published)
// for their gateways (cluster/gateway). At R replicas and M members that is
// R·(M−1) messages per period at most, each a few hundred bytes in steady
// state (8 bytes per block added or dropped), against one probe per
// candidate per request before.
//
// # Membership providers and failure detection
//
// Config.Provider (--cluster-provider) picks protoactor-go's provider;
// Start refuses an unknown name with the list of known ones. A member that
// dies without leaving (SIGKILL, a lost machine) leaves every other
// member's View, and its jobs in flight end Unavailable, when the provider
// reports it gone:
//
//   - "automanaged" (the default): Config.Peers, ProviderPort and
//     RefreshInterval. Every member polls every peer's /_health each
//     RefreshInterval; a dead one is gone at the next poll, within about
//     one interval (TestPrefillAcrossNodes: 20–200ms at a 200ms interval;
//     the default interval is 1s). The peer list is static.
//   - "etcd": Config.Etcd (--etcd-endpoints a,b, a key prefix BasePath,
//     default "/troupe"). Each member puts its key
//     BasePath/<cluster>/<cluster>@<id> under a lease and keeps the lease
//     alive; every member watches the prefix. A member that dies stops
//     renewing, etcd expires the lease and deletes the key, and the
//     others drop it: the lease TTL is fixed at 3s by the pinned provider
//     (EtcdLeaseTTL, no option), renewed every second, and etcd checks
//     for expired leases every 500ms, so a kill is seen about 2–3.5s later
//     (TestEtcdProvider, against etcd 3.4.23 from Debian's etcd-server
//     with the provider's v3.5 client: 1.9–3.4s over 20 runs). A graceful
//     Close deletes the key at once (~20ms). The pinned provider lists the
//     members, then watches from the current revision rather than the
//     listed one, so a member registering in between can be missed for
//     good (seen once in about a dozen runs of TestEtcdProvider, a replica
//     that never saw a gateway): every member re-puts its key (same value
//     and lease) each EtcdConfig.Reannounce, 5s by default, which bounds
//     how long a missed join stays unseen. Start dials etcd blocking
//     (EtcdConfig.DialTimeout, default 5s), so an unreachable etcd is an
//     error, not a hang.
//   - "k8s": inside a pod only (in-cluster config: the service account
//     token, KUBERNETES_SERVICE_HOST); elsewhere Start fails saying so. The
//     provider labels its own pod (cluster.proto.actor/cluster, port,
//     member-id) and watches the pods of its namespace that carry its
//     cluster's label; a pod is a member while it is Running with every
//     container Ready. It needs pods get, patch and watch in its namespace
//     (deploy/k8s/rbac.yaml), finds its pod by the hostname (keep it the
//     pod's name), reads the namespace from the service account, and gives
//     members the address podIP:port, so remote must listen on the pod IP
//     (deploy/k8s sets it from status.podIP). A member is dropped when its
//     pod is deleted (at once), when its container dies or a readiness
//     probe fails (as soon as the kubelet reports it, for an exit;
//     periodSeconds×failureThreshold, 10s in deploy/k8s, for a wedged
//     engine), or when its node is lost (the node controller's grace
//     period, 40s by default). Not measured here: it needs a cluster.
//
// The etcd and k8s providers name members themselves ("<cluster>@<actor
// system id>"; a random id drawn by the k8s provider), so a node takes the
// member at its own address as itself (Node.ID).
//
// # Protoactor facilities used, as the pinned version wants them
//
//   - cluster.Configure + cluster.New + Cluster.StartMember, with, by
//     default, the automanaged provider (automanaged.NewWithConfig(refresh, port,
//     peers...)): every member serves GET /_health on ProviderPort and
//     polls every peer's each refresh interval; a peer that does not
//     answer leaves the topology at the next poll. --cluster-provider
//     automanaged --cluster-peers host:port,... maps onto Config.Peers and
//     Config.ProviderPort. Gateways are members too, not cluster clients
//     (StartClient): the pinned automanaged provider's Shutdown
//     dereferences the HTTP server that only StartMember creates.
//   - disthash.New() as the identity lookup: cluster.Configure requires
//     one; no grain is activated.
//   - remote.Configure(host, port): messages cross as protobuf through
//     remote's default serializer, which finds a received message's type
//     by its full name in protoregistry.GlobalTypes. Registering the
//     messages therefore needs nothing but linking package actors (its
//     generated messages.pb.go registers the file descriptor at init).
//     remote.WithKinds is for remote spawning of actor kinds and
//     cluster.WithKinds for grain kinds; neither registers messages. A
//     member that receives a type it does not link crashes (the pinned
//     serializer dereferences the failed lookup), so all members run the
//     same troupe binary.
//   - the EventStream's *cluster.ClusterTopology events (members, joined,
//     left), subscribed to before StartMember (whose first provider poll
//     already publishes one) and forwarded into the endpoint actor once it
//     is spawned.
//   - actor.Context.Watch on a remote PID: when the member list drops a
//     member it publishes remote.EndpointTerminatedEvent, and remote
//     delivers Terminated (AddressTerminated) to the watchers.
//
// # Quirks of the pinned protoactor-go (v0.0.0-20240822202345-3c0e61ca19c9,
// also the newest version the module proxy serves)
//
//   - Data races inside the cluster, in every member, whatever the host
//     does: remote.BlockList reads its member set without the lock its
//     writers take (BlockedMembers and IsBlocked against Block, from the
//     provider's poll, the gossip actor and remote's endpoint reader), and
//     the GossipActor changes gossip state that an endpoint writer is still
//     marshalling; and remote's shutdown flag (endpointManager.stopped) is
//     written by Shutdown and read by every remote send unsynchronised
//     (Node.Close stops troupe's senders first). A test whose process
//     hosts a member fails under -race;
//     this package's multi-process test runs every member as a child and
//     fails only on race reports that run through troupe's code.
//   - StartMember sleeps a fixed second and panics where it fails (Start
//     turns the panic into an error); a graceful Shutdown sleeps two.
//   - The etcd provider's shutdown flag is a plain bool that Shutdown (from
//     Node.Close) writes while its keep-alive and watch goroutines read it;
//     the tests count that report as upstream, as they do remote's
//     endpointManager.stopped written by Shutdown while remote's own
//     endpoint writer reads it. Its lease TTL (3s) and retry interval (1s)
//     have no option.
//   - The k8s provider has no options at all (namespace and pod name come
//     from the pod), and BroadcastEvent's self test compares its random
//     member id to the actor system's id (troupe does not broadcast).
//   - The automanaged provider listens on 0.0.0.0 (no bind option), logs an
//     ERROR for every poll of a peer that is down, and a member that left
//     is blocked for good by its id (a restarted process has a new id, so
//     it joins again).
package node
