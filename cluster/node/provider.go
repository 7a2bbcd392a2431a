package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd"
	"github.com/asynkron/protoactor-go/cluster/clusterproviders/k8s"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/client-go/rest"
)

// The membership providers Config.Provider names (--cluster-provider).
const (
	ProviderAutomanaged = "automanaged"
	ProviderEtcd        = "etcd"
	ProviderK8s         = "k8s"
)

// Providers lists the provider names Config.Provider accepts.
var Providers = []string{ProviderAutomanaged, ProviderEtcd, ProviderK8s}

// EtcdLeaseTTL is the lease the pinned etcd provider grants every member
// (fixed in protoactor-go, no option): a member that dies without leaving
// is dropped when its lease expires: the client renews every third of the
// TTL and etcd looks for expired leases every 500ms, so about 2–3.5s after
// it died.
const EtcdLeaseTTL = 3 * time.Second

// EtcdConfig configures the etcd provider (--etcd-endpoints and friends).
type EtcdConfig struct {
	// Endpoints are the etcd client URLs or host:port, e.g.
	// "http://10.0.0.5:2379"; at least one.
	Endpoints []string
	// BasePath is the key prefix the members register under (as
	// BasePath/ClusterName/ClusterName@memberID); "" means "/troupe".
	BasePath string
	// DialTimeout bounds the first connection: Start fails with an error
	// when no endpoint answers within it instead of hanging; 0 means 5s.
	DialTimeout time.Duration
	// Username and Password, when set, authenticate to etcd.
	Username, Password string
	// Reannounce is how often a member puts its own key again (same
	// value, same lease); 0 means 5s. The pinned provider lists the
	// members and then watches from the current revision, not from the
	// one it listed at, so a member that registers in between is missed
	// by that watcher until its key changes: this bounds how long.
	Reannounce time.Duration
}

// SplitList splits a comma-separated flag value (--etcd-endpoints a,b),
// dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// newProvider builds the membership provider cfg names, and says which
// member id the provider will give this node ("" where only the topology
// will tell: the k8s provider draws a random id of its own).
func newProvider(cfg *Config, system *actor.ActorSystem) (cluster.ClusterProvider, string, error) {
	switch cfg.Provider {
	case "", ProviderAutomanaged:
		if cfg.ProviderPort <= 0 || len(cfg.Peers) == 0 {
			return nil, "", errors.New("cluster node: the automanaged provider needs a provider port and the peer list")
		}
		return automanaged.NewWithConfig(cfg.RefreshInterval, cfg.ProviderPort, cfg.Peers...), system.ID, nil
	case ProviderEtcd:
		e := cfg.Etcd
		if len(e.Endpoints) == 0 {
			return nil, "", errors.New("cluster node: the etcd provider needs at least one endpoint (--etcd-endpoints)")
		}
		if e.BasePath == "" {
			e.BasePath = "/troupe"
		}
		if !strings.HasPrefix(e.BasePath, "/") || strings.HasSuffix(e.BasePath, "/") {
			return nil, "", fmt.Errorf("cluster node: etcd base path %q must start with / and not end with one", e.BasePath)
		}
		if e.DialTimeout <= 0 {
			e.DialTimeout = 5 * time.Second
		}
		// A blocking dial makes an unreachable etcd an error here: the
		// pinned provider's first read has no deadline and would hang
		// Start for good.
		if e.Reannounce <= 0 {
			e.Reannounce = 5 * time.Second
		}
		cc := clientv3.Config{
			Endpoints: e.Endpoints, DialTimeout: e.DialTimeout,
			Username: e.Username, Password: e.Password,
			DialOptions: []grpc.DialOption{grpc.WithBlock()},
			Logger:      quietEtcdLogger(),
		}
		p, err := etcd.NewWithConfig(e.BasePath, cc)
		if err != nil {
			return nil, "", fmt.Errorf("cluster node: etcd at %s: %w", strings.Join(e.Endpoints, ","), err)
		}
		// The pinned provider names a member "<cluster>@<actor system id>"
		// and keeps it under <base>/<cluster>/<member>.
		id := cfg.ClusterName + "@" + system.ID
		// Connected now too, like the provider's: remote.Start sets
		// grpc's global logger, which a client still connecting in the
		// background reads.
		re, err := clientv3.New(cc)
		if err != nil {
			return nil, "", fmt.Errorf("cluster node: etcd at %s: %w", strings.Join(e.Endpoints, ","), err)
		}
		go reannounce(system, re, e.BasePath+"/"+cfg.ClusterName+"/"+id, e.Reannounce, cfg.Logger)
		return p, id, nil
	case ProviderK8s:
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("cluster node: the k8s provider runs only inside a Kubernetes pod (with a service account token): %w", err)
		}
		p, err := k8s.NewWithConfig(rc)
		if err != nil {
			return nil, "", fmt.Errorf("cluster node: k8s provider: %w", err)
		}
		return p, "", nil
	}
	return nil, "", fmt.Errorf("cluster node: unknown cluster provider %q (want one of %s)", cfg.Provider, strings.Join(Providers, ", "))
}

// quietEtcdLogger keeps the etcd client's own logs to errors (it narrates
// every connection at INFO otherwise).
func quietEtcdLogger() *zap.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	l, err := zc.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

// reannounce puts this member's key again every period, with the value
// and lease the provider gave it, until the actor system stops: every
// watcher sees a Put, and one that missed the member's registration (see
// EtcdConfig.Reannounce) learns of it. A key that is not there (not
// registered yet, or deleted on leaving) is left alone.
func reannounce(system *actor.ActorSystem, cli *clientv3.Client, key string, every time.Duration, log *slog.Logger) {
	defer cli.Close()
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if system.IsStopped() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		res, err := cli.Get(ctx, key)
		if err == nil && len(res.Kvs) == 1 {
			kv := res.Kvs[0]
			// Only if the key is still the one read: a leave in between
			// must not be undone.
			_, err = cli.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
				Then(clientv3.OpPut(key, string(kv.Value), clientv3.WithIgnoreLease())).
				Commit()
		}
		cancel()
		if err != nil && !system.IsStopped() {
			log.Debug("cluster node: etcd: re-announcing this member failed", "key", key, "error", err)
		}
	}
}
