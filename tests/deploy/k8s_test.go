// Package deploy checks the Kubernetes manifests in deploy/k8s: each
// document decodes strictly (no unknown or misspelled field) into the
// official k8s.io/api type of its kind, and the things that make a
// deployment work or not agree with troupe's code: probes hit routes the
// HTTP server serves, ports match the container's TROUPE_* settings, the
// Role grants exactly the verbs protoactor-go's k8s provider calls, and
// selectors select the pods they mean to.
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// manifests are the decoded objects of deploy/k8s, by kind.
type manifests struct {
	namespaces      []corev1.Namespace
	serviceAccounts []corev1.ServiceAccount
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
	deployments     []appsv1.Deployment
	services        []corev1.Service
}

var docSep = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeStrict decodes one YAML document into v, failing on any field
// v's type does not have.
func decodeStrict(doc []byte, v any) error {
	return yaml.UnmarshalStrict(doc, v)
}

func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, "deploy", "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/k8s: %v", err)
	}
	var m manifests
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range docSep.Split(string(b), -1) {
			if isBlank(doc) {
				continue
			}
			where := fmt.Sprintf("%s document %d", filepath.Base(f), i+1)
			var tm metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			var dst any
			switch tm.APIVersion + " " + tm.Kind {
			case "v1 Namespace":
				m.namespaces = append(m.namespaces, corev1.Namespace{})
				dst = &m.namespaces[len(m.namespaces)-1]
			case "v1 ServiceAccount":
				m.serviceAccounts = append(m.serviceAccounts, corev1.ServiceAccount{})
				dst = &m.serviceAccounts[len(m.serviceAccounts)-1]
			case "rbac.authorization.k8s.io/v1 Role":
				m.roles = append(m.roles, rbacv1.Role{})
				dst = &m.roles[len(m.roles)-1]
			case "rbac.authorization.k8s.io/v1 RoleBinding":
				m.roleBindings = append(m.roleBindings, rbacv1.RoleBinding{})
				dst = &m.roleBindings[len(m.roleBindings)-1]
			case "apps/v1 Deployment":
				m.deployments = append(m.deployments, appsv1.Deployment{})
				dst = &m.deployments[len(m.deployments)-1]
			case "v1 Service":
				m.services = append(m.services, corev1.Service{})
				dst = &m.services[len(m.services)-1]
			default:
				t.Fatalf("%s: unexpected kind %q %q", where, tm.APIVersion, tm.Kind)
			}
			if err := decodeStrict([]byte(doc), dst); err != nil {
				t.Fatalf("%s (%s): %v", where, tm.Kind, err)
			}
		}
	}
	return m
}

func isBlank(doc string) bool {
	for _, line := range strings.Split(doc, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			return false
		}
	}
	return true
}

// TestStrictDecodeRejectsUnknownFields: the decoder the manifests go
// through refuses a misspelled field (replica for replicas).
func TestStrictDecodeRejectsUnknownFields(t *testing.T) {
	var d appsv1.Deployment
	err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 2\n"), &d)
	if err == nil || !strings.Contains(err.Error(), "replica") {
		t.Fatalf("a misspelled field decoded: %v", err)
	}
	if err := decodeStrict([]byte("apiVersion: apps/v1\nkind: Deployment\nspec:\n  replicas: 2\n"), &d); err != nil || *d.Spec.Replicas != 2 {
		t.Fatalf("a correct field: %v", err)
	}
}

// routes are the GET paths troupe's HTTP server registers on the app.
func routes(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(root, "http", "server.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`app\.Get\("([^"]+)"`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if !slices.Contains(out, "/health") {
		t.Fatalf("found no /health route in http/server.go (routes %q): the route scan is broken", out)
	}
	return out
}

// serveFlags are the flag names of troupe serve.
func serveFlags(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(root, "cmd", "troupe", "serve.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`fs\.\w+\((?:[\w*&]+, )?"([a-z0-9-]+)"`).FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	if !slices.Contains(out, "kv-budget") || !slices.Contains(out, "port") {
		t.Fatalf("the flag scan of cmd/troupe/serve.go found %q", out)
	}
	return out
}

// providerVerbs are the verbs on pods that the pinned protoactor-go k8s
// provider's source calls (Pods(ns).Get/Watch/Patch/...).
func providerVerbs(t *testing.T) []string {
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`github\.com/asynkron/protoactor-go (\S+)`).FindSubmatch(gomod)
	if v == nil {
		t.Fatal("go.mod requires no protoactor-go")
	}
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(string(bytes.TrimSpace(cache)), "github.com", "asynkron", "protoactor-go@"+string(v[1]),
		"cluster", "clusterproviders", "k8s")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		t.Fatalf("the k8s provider's source is not in the module cache at %s (go mod download in the main module)", dir)
	}
	verbs := map[string]string{"Get": "get", "List": "list", "Watch": "watch", "Patch": "patch",
		"Update": "update", "UpdateStatus": "update", "Create": "create", "Delete": "delete", "DeleteCollection": "deletecollection"}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`\.Pods\((?:[^()]|\([^()]*\))*\)\.(\w+)\(`).FindAllSubmatch(b, -1) {
			verb, ok := verbs[string(m[1])]
			if !ok {
				t.Fatalf("%s calls Pods().%s: map it to an RBAC verb", filepath.Base(f), m[1])
			}
			if !slices.Contains(out, verb) {
				out = append(out, verb)
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("found no pod calls in %s: the scan is broken", dir)
	}
	slices.Sort(out)
	return out
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e, true
		}
	}
	return corev1.EnvVar{}, false
}

func port(c corev1.Container, name string) (int32, bool) {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort, true
		}
	}
	return 0, false
}

func TestManifests(t *testing.T) {
	m := load(t)
	paths, flags, verbs := routes(t), serveFlags(t), providerVerbs(t)
	t.Logf("routes %q; the k8s provider calls pods %q", paths, verbs)

	// One namespace, declared, holds everything.
	if len(m.namespaces) != 1 {
		t.Fatalf("%d Namespace objects, want 1", len(m.namespaces))
	}
	ns := m.namespaces[0].Name
	objects := []metav1.ObjectMeta{}
	for _, o := range m.serviceAccounts {
		objects = append(objects, o.ObjectMeta)
	}
	for _, o := range m.roles {
		objects = append(objects, o.ObjectMeta)
	}
	for _, o := range m.roleBindings {
		objects = append(objects, o.ObjectMeta)
	}
	for _, o := range m.deployments {
		objects = append(objects, o.ObjectMeta)
	}
	for _, o := range m.services {
		objects = append(objects, o.ObjectMeta)
	}
	for _, o := range objects {
		if o.Namespace != ns {
			t.Errorf("%s is in namespace %q, want %q", o.Name, o.Namespace, ns)
		}
	}

	// RBAC: the Role grants exactly the provider's verbs on pods, and
	// is bound to the service account the pods run as.
	if len(m.roles) != 1 || len(m.roleBindings) != 1 || len(m.serviceAccounts) != 1 {
		t.Fatalf("want one Role, RoleBinding and ServiceAccount: %d %d %d", len(m.roles), len(m.roleBindings), len(m.serviceAccounts))
	}
	role, binding, sa := m.roles[0], m.roleBindings[0], m.serviceAccounts[0]
	var granted []string
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || !slices.Equal(r.Resources, []string{"pods"}) || len(r.ResourceNames) != 0 {
			t.Errorf("Role rule %+v: want only pods in the core group", r)
		}
		granted = append(granted, r.Verbs...)
	}
	slices.Sort(granted)
	if !slices.Equal(slices.Compact(granted), verbs) {
		t.Errorf("the Role grants %q on pods; the provider calls %q", granted, verbs)
	}
	if binding.RoleRef.Kind != "Role" || binding.RoleRef.Name != role.Name || binding.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("RoleBinding refers to %+v, want Role %s", binding.RoleRef, role.Name)
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Kind != "ServiceAccount" ||
		binding.Subjects[0].Name != sa.Name || binding.Subjects[0].Namespace != ns {
		t.Errorf("RoleBinding subjects %+v, want ServiceAccount %s/%s", binding.Subjects, ns, sa.Name)
	}

	// The workloads: a replica Deployment (with a model) and a gateway
	// Deployment (without).
	components := map[string]appsv1.Deployment{}
	for _, d := range m.deployments {
		components[d.Spec.Template.Labels["app.kubernetes.io/component"]] = d
	}
	if len(m.deployments) != 2 || components["replica"].Name == "" || components["gateway"].Name == "" {
		t.Fatalf("want a replica and a gateway Deployment, got %d: %v", len(m.deployments), components)
	}
	clusterName := ""
	for comp, d := range components {
		t.Run(comp, func(t *testing.T) {
			pod := d.Spec.Template
			if d.Spec.Selector == nil || !subset(d.Spec.Selector.MatchLabels, pod.Labels) {
				t.Errorf("selector %v does not select the template's labels %v", d.Spec.Selector, pod.Labels)
			}
			for other, o := range components {
				if other != comp && subset(d.Spec.Selector.MatchLabels, o.Spec.Template.Labels) {
					t.Errorf("the %s selector also selects the %s pods", comp, other)
				}
			}
			if pod.Spec.ServiceAccountName != sa.Name {
				t.Errorf("serviceAccountName %q, want %q (the Role's)", pod.Spec.ServiceAccountName, sa.Name)
			}
			if pod.Spec.AutomountServiceAccountToken != nil && !*pod.Spec.AutomountServiceAccountToken {
				t.Error("the service account token is not mounted: the provider's in-cluster config needs it")
			}
			if pod.Spec.Hostname != "" || pod.Spec.Subdomain != "" {
				t.Error("the provider looks its pod up by hostname: do not set spec.hostname")
			}
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
			}
			c := pod.Spec.Containers[0]
			for _, e := range c.Env {
				name, ok := strings.CutPrefix(e.Name, "TROUPE_")
				if !ok {
					continue
				}
				flag := strings.ToLower(strings.ReplaceAll(name, "_", "-"))
				if !slices.Contains(flags, flag) {
					t.Errorf("env %s sets no flag of troupe serve (--%s)", e.Name, flag)
				}
			}
			gateway := map[string]string{"gateway": "true", "replica": ""}[comp]
			want := map[string]string{"TROUPE_HOST": "0.0.0.0", "TROUPE_CLUSTER_PROVIDER": "k8s", "TROUPE_GATEWAY": gateway}
			for name, v := range want {
				if e, _ := env(c, name); e.Value != v {
					t.Errorf("%s=%q, want %q", name, e.Value, v)
				}
			}
			if e, _ := env(c, "TROUPE_CLUSTER_NAME"); e.Value == "" {
				t.Error("TROUPE_CLUSTER_NAME unset")
			} else if clusterName == "" {
				clusterName = e.Value
			} else if clusterName != e.Value {
				t.Errorf("cluster name %q, the other workload's is %q", e.Value, clusterName)
			}
			if e, _ := env(c, "TROUPE_CLUSTER_HOST"); e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "status.podIP" {
				t.Errorf("TROUPE_CLUSTER_HOST %+v: remote must listen on the pod IP, the address the provider gives members", e)
			}
			if _, hasModel := env(c, "TROUPE_MODEL"); hasModel != (comp == "replica") {
				t.Errorf("TROUPE_MODEL set: %v; only replicas load a model", hasModel)
			}
			for portName, envName := range map[string]string{"http": "TROUPE_PORT", "remote": "TROUPE_CLUSTER_PORT"} {
				e, _ := env(c, envName)
				p, ok := port(c, portName)
				if !ok || strconv.Itoa(int(p)) != e.Value {
					t.Errorf("container port %q = %d, %s = %q: they must agree", portName, p, envName, e.Value)
				}
			}
			probes := map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe}
			for kind, p := range probes {
				if p == nil || p.HTTPGet == nil {
					t.Errorf("no HTTP %s probe", kind)
					continue
				}
				if !slices.Contains(paths, p.HTTPGet.Path) {
					t.Errorf("%s probe on %q: no such route (routes %q)", kind, p.HTTPGet.Path, paths)
				}
				if _, ok := port(c, p.HTTPGet.Port.String()); !ok || p.HTTPGet.Port.String() != "http" {
					t.Errorf("%s probe on port %q, want the container's http port", kind, p.HTTPGet.Port.String())
				}
			}
			// /health and /ready are 503 while the model loads: liveness
			// may only count once the startup probe has passed, and the
			// startup probe must outlast a model load.
			if comp == "replica" && c.StartupProbe != nil {
				if budget := c.StartupProbe.PeriodSeconds * c.StartupProbe.FailureThreshold; budget < 300 {
					t.Errorf("the startup probe gives a model load %ds, want at least 300s", budget)
				}
			}
			if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path != "/ready" {
				t.Errorf("readiness on %q: /ready is the route that turns 503 on a stalled engine", c.ReadinessProbe.HTTPGet.Path)
			}
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("resource requests %v: want cpu and memory", c.Resources.Requests)
			}
			if mem := c.Resources.Limits.Memory(); !mem.IsZero() && mem.Cmp(*c.Resources.Requests.Memory()) < 0 {
				t.Errorf("memory limit %v below the request %v", mem, c.Resources.Requests.Memory())
			}
		})
	}

	// A gateway without a model starts serving only once a replica is a
	// member, that is Ready, its model loaded: its startup probe must wait
	// as long as a replica's.
	budget := func(d appsv1.Deployment) int32 {
		p := d.Spec.Template.Spec.Containers[0].StartupProbe
		if p == nil {
			return 0
		}
		return p.PeriodSeconds * p.FailureThreshold
	}
	if g, r := budget(components["gateway"]), budget(components["replica"]); g < r {
		t.Errorf("the gateways' startup probe allows %ds, the replicas' %ds: a gateway waits for a loaded replica", g, r)
	}

	// Services select pods that have the ports they target; the API
	// Service selects the gateways only.
	for _, s := range m.services {
		var selected []string
		for comp, d := range components {
			if subset(s.Spec.Selector, d.Spec.Template.Labels) {
				selected = append(selected, comp)
				for _, sp := range s.Spec.Ports {
					if _, ok := port(d.Spec.Template.Spec.Containers[0], sp.TargetPort.String()); !ok {
						t.Errorf("Service %s port %s targets %q, which the %s pods do not name", s.Name, sp.Name, sp.TargetPort.String(), comp)
					}
				}
			}
		}
		slices.Sort(selected)
		for _, sp := range s.Spec.Ports {
			switch sp.Name {
			case "http":
				if !slices.Equal(selected, []string{"gateway"}) || sp.Port != 8080 {
					t.Errorf("Service %s: HTTP port %d selects %q, want 8080 on the gateways only", s.Name, sp.Port, selected)
				}
			case "remote":
				if !slices.Equal(selected, []string{"gateway", "replica"}) || s.Spec.ClusterIP != corev1.ClusterIPNone {
					t.Errorf("Service %s: the remote port selects %q (clusterIP %q), want every member, headless", s.Name, selected, s.Spec.ClusterIP)
				}
			default:
				t.Errorf("Service %s: unexpected port %q", s.Name, sp.Name)
			}
		}
	}
}
