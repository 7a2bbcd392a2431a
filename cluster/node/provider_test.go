package node

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster"
)

func TestSplitList(t *testing.T) {
	got := SplitList(" http://a:2379, ,b:2379,")
	if want := []string{"http://a:2379", "b:2379"}; !slices.Equal(got, want) {
		t.Errorf("SplitList = %q, want %q", got, want)
	}
	if got := SplitList(""); len(got) != 0 {
		t.Errorf("SplitList(\"\") = %q, want none", got)
	}
}

// TestProviderConfigErrors: a provider that cannot be built fails Start
// with an error that says what is missing, and quickly (no member starts).
func TestProviderConfigErrors(t *testing.T) {
	// A port nothing listens on: etcd is unreachable there.
	closed, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"unknown", Config{Provider: "consul"}, `unknown cluster provider "consul" (want one of automanaged, etcd, k8s)`},
		{"automanaged without peers", Config{Provider: ProviderAutomanaged, ProviderPort: 9000}, "automanaged provider needs a provider port and the peer list"},
		{"default is automanaged", Config{}, "automanaged provider needs a provider port and the peer list"},
		{"etcd without endpoints", Config{Provider: ProviderEtcd}, "etcd provider needs at least one endpoint"},
		{"etcd base path", Config{Provider: ProviderEtcd, Etcd: EtcdConfig{Endpoints: []string{"127.0.0.1:2379"}, BasePath: "troupe/"}},
			`etcd base path "troupe/" must start with / and not end with one`},
		{"etcd unreachable", Config{Provider: ProviderEtcd, Etcd: EtcdConfig{
			Endpoints: []string{"127.0.0.1:" + strconv.Itoa(closed)}, DialTimeout: 300 * time.Millisecond}},
			"cluster node: etcd at 127.0.0.1:" + strconv.Itoa(closed) + ": context deadline exceeded"},
		{"k8s outside a pod", Config{Provider: ProviderK8s}, "the k8s provider runs only inside a Kubernetes pod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			n, err := Start(tc.cfg)
			if err == nil {
				n.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if took := time.Since(began); took > 3*time.Second {
				t.Errorf("Start took %v to fail", took)
			}
		})
	}
	// In a pod's environment but without its service account token.
	if _, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token"); err == nil {
		t.Skip("this machine has a service account token")
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	_, err = Start(Config{Provider: ProviderK8s})
	if err == nil || !strings.Contains(err.Error(), "the k8s provider runs only inside a Kubernetes pod") ||
		!strings.Contains(err.Error(), "serviceaccount/token") {
		t.Errorf("k8s without a token: %v", err)
	}
}

// TestSelfByAddress: with the k8s provider a node does not know its member
// id before the topology lists it (the provider draws one of its own);
// the member at the node's own address is this node.
func TestSelfByAddress(t *testing.T) {
	sys := bareSystem(t)
	sys.ProcessRegistry.Address = "10.1.2.3:8090" // as remote sets it
	n, pid := bareNode(t, sys, nil)
	// newProvider says "" for k8s: Start stores nothing, and ID is the
	// actor system's until the topology tells.
	if n.ID() != sys.ID {
		t.Fatalf("ID() = %q before the topology, want the actor system's %q", n.ID(), sys.ID)
	}
	self := &cluster.Member{Id: "5f0c9e2a", Host: "10.1.2.3", Port: 8090}
	other := &cluster.Member{Id: "77ab01cd", Host: "10.1.2.4", Port: 8090}
	sys.Root.Send(pid, &cluster.ClusterTopology{Members: []*cluster.Member{other, self}, Joined: []*cluster.Member{other, self}})
	if !waitFor(5*time.Second, func() bool { return len(n.View().Members) == 2 }) {
		t.Fatalf("members %+v", n.View().Members)
	}
	if n.ID() != self.Id {
		t.Errorf("ID() = %q, want the provider's id for this address %q", n.ID(), self.Id)
	}
	for _, m := range n.View().Members {
		if m.Self != (m.ID == self.Id) {
			t.Errorf("member %+v: Self wrong", m)
		}
	}
}
