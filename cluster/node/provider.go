package node

import (
	"errors"
	"fmt"
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
		p, err := etcd.NewWithConfig(e.BasePath, clientv3.Config{
			Endpoints: e.Endpoints, DialTimeout: e.DialTimeout,
			Username: e.Username, Password: e.Password,
			DialOptions: []grpc.DialOption{grpc.WithBlock()},
			Logger:      quietEtcdLogger(),
		})
		if err != nil {
			return nil, "", fmt.Errorf("cluster node: etcd at %s: %w", strings.Join(e.Endpoints, ","), err)
		}
		// The pinned provider names a member "<cluster>@<actor system id>".
		return p, cfg.ClusterName + "@" + system.ID, nil
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
