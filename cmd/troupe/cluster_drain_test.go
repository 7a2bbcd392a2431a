package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// clusterMembers starts n processes' worth of ports and the flags every
// member shares: member i has provider port ports[i], HTTP port
// ports[n+i] and remote port ports[2n+i].
func clusterMembers(t *testing.T, n int) (ports []int, common []string) {
	ports = freePorts(t, 3*n)
	var peers []string
	for i := 0; i < n; i++ {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(ports[i]))
	}
	return ports, []string{"--cluster-provider", "automanaged", "--cluster-peers", strings.Join(peers, ","), "--threads", "1",
		"--kv-budget", "64MiB", "--kv-prefault=false", "--stats-interval", "0", "--log-level", "info"}
}

func startMemberChild(t *testing.T, name string, ports []int, n, i int, common []string, extra ...string) *serveChild {
	args := append(slices.Clone(common), "--cluster-provider-port", strconv.Itoa(ports[i]))
	return startServe(t, name, ports[n+i], ports[2*n+i], append(args, extra...)...)
}

// stateOf is the state the view gives the member at remote ("" when it is
// not a member).
func (v *clusterView) stateOf(remote string) string {
	for _, m := range v.Members {
		if m.Address == remote {
			return m.State
		}
	}
	return ""
}

// metricsOf is url's /metrics text ("" when it does not answer).
func metricsOf(url string) string {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// logTime is the time of the first record of a slog text log that
// contains every one of want.
func logTime(out string, want ...string) (time.Time, bool) {
	for _, line := range strings.Split(out, "\n") {
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(line, w)
		}
		if !ok {
			continue
		}
		v, found := strings.CutPrefix(line, "time=")
		if !found {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if at, err := time.Parse(time.RFC3339, v); err == nil {
			return at, true
		}
	}
	return time.Time{}, false
}

// TestClusterDrain: SIGTERM drains a replica. Two replicas and a gateway,
// each `troupe serve` in a child process; a long stream runs on replica A
// (whichever the gateway picked). SIGTERM A: the gateway sees A draining
// (no longer routable) at once, new requests go to the other replica
// without a retry while A's stream goes on, the stream completes normally,
// then A exits 0 and the gateway drops it.
func TestClusterDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three cluster members")
	}
	ports, common := clusterMembers(t, 3)
	replicas := []*serveChild{
		startMemberChild(t, "replica-a", ports, 3, 0, common, "--parallel", "1", "--shutdown-timeout", "60s"),
		startMemberChild(t, "replica-b", ports, 3, 1, common, "--parallel", "1", "--shutdown-timeout", "60s"),
	}
	gw := startMemberChild(t, "gateway", ports, 3, 2, common, "--no-model")
	var view clusterView
	if !waitUntil(3*time.Minute, func() bool {
		return getJSON(gw.url+"/v1/cluster", &view) == nil && len(view.Members) == 3 && view.routable() == 2
	}) {
		t.Fatalf("the gateway's /v1/cluster did not show 3 members, 2 routable: %+v", view)
	}

	const streamTokens = 3000
	lines := openStream(t, gw.url, fmt.Sprintf(
		`{"stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"ignore_eos":true,"temperature":0,"messages":[{"role":"user","content":"talk for long"}]}`, streamTokens))
	var victim, other *serveChild
	if !waitUntil(20*time.Second, func() bool {
		var v clusterView
		if getJSON(gw.url+"/v1/cluster", &v) != nil {
			return false
		}
		for _, m := range v.Members {
			if m.Load != nil && m.Load.Running == 1 {
				for i, r := range replicas {
					if r.remote == m.Address {
						victim, other = r, replicas[1-i]
					}
				}
			}
		}
		return victim != nil
	}) {
		t.Fatal("no replica reports the stream running")
	}
	// The stream is read as it comes.
	type streamEnd struct {
		tokens int // completion_tokens of its usage
		finish string
		errs   string
		at     time.Time
	}
	ended := make(chan streamEnd, 1)
	go func() {
		var e streamEnd
		for lines.Scan() {
			line := lines.Text()
			switch {
			case strings.Contains(line, `"error"`):
				e.errs += line
			case strings.Contains(line, `"finish_reason":"length"`):
				e.finish = "length"
			}
			if _, u, ok := strings.Cut(line, `"completion_tokens":`); ok {
				u, _, _ = strings.Cut(u, ",")
				e.tokens, _ = strconv.Atoi(strings.TrimRight(u, "}"))
			}
		}
		e.at = time.Now()
		ended <- e
	}()

	sigterm := time.Now()
	if err := victim.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitUntil(10*time.Second, func() bool {
		var v clusterView
		return getJSON(gw.url+"/v1/cluster", &v) == nil && v.stateOf(victim.remote) == "draining" && v.routable() == 1
	}) {
		t.Fatal("the gateway does not list the SIGTERMed replica as draining")
	}
	seen := time.Since(sigterm)
	// New requests meanwhile: answered, by the other replica, straight
	// (a draining replica would refuse them: a retry).
	before := metricValue(metricsOf(other.url), "troupe_generated_tokens_total")
	const asked = 3
	for i := 0; i < asked; i++ {
		if a, _, err := postChat(gw.url, chatBody(1, fmt.Sprintf("while draining %d", i))); err != nil || len(a.Choices) != 1 {
			t.Fatalf("a request while a replica drains: %v %+v", err, a)
		}
	}
	answered := time.Now()
	if got := metricValue(metricsOf(other.url), "troupe_generated_tokens_total") - before; got != asked {
		t.Errorf("the other replica generated %v tokens for the %d one-token requests sent while draining", got, asked)
	}
	gm := metricsOf(gw.url)
	if r := metricValue(gm, "troupe_route_retries_total"); r != 0 {
		t.Errorf("troupe_route_retries_total %v: requests were sent to the draining replica", r)
	}
	for state, want := range map[string]float64{"routable": 1, "draining": 1, "loading": 0} {
		if got := metricValue(gm, `troupe_cluster_replicas{state="`+state+`"}`); got != want {
			t.Errorf("while draining, the gateway's troupe_cluster_replicas{state=%q} is %v, want %v", state, got, want)
		}
	}

	var end streamEnd
	select {
	case end = <-ended:
	case <-time.After(2 * time.Minute):
		t.Fatal("the stream on the draining replica did not end")
	}
	if end.errs != "" || end.finish != "length" || end.tokens != streamTokens {
		t.Fatalf("the stream on the draining replica ended with %d tokens, finish %q, errors %q: want all %d tokens, length",
			end.tokens, end.finish, end.errs, streamTokens)
	}
	if !answered.Before(end.at) {
		t.Errorf("the requests sent while draining were answered after the stream ended: the stream was too short to tell")
	}
	select {
	case <-victim.Exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the drained replica did not exit")
	}
	exited := time.Since(sigterm)
	// 66 is the race detector's exit status: the pinned protoactor-go
	// races in every member; childproc judges the reports (racereport).
	if code := victim.Cmd.ProcessState.ExitCode(); code != 0 && code != 66 {
		t.Errorf("the drained replica exited %d", code)
	}
	if !strings.Contains(victim.Out.String(), "drained: the jobs routed here have ended") {
		t.Errorf("the replica did not log its drain")
	}
	if !waitUntil(15*time.Second, func() bool {
		var v clusterView
		return getJSON(gw.url+"/v1/cluster", &v) == nil && len(v.Members) == 2 && v.stateOf(victim.remote) == ""
	}) {
		t.Fatal("the gateway still lists the drained replica")
	}
	dropped := time.Since(sigterm)
	if _, _, err := postChat(gw.url, chatBody(1, "after the drain")); err != nil {
		t.Fatal(err)
	}
	drained, ok := logTime(victim.Out.String(), "drained: the jobs routed here have ended")
	if !ok {
		t.Fatal("the replica's drain log has no time")
	}
	t.Logf("SIGTERM: draining on the gateway after %v; stream ended (%d tokens) after %v; drained after %v; replica exited after %v; dropped by the gateway after %v",
		seen.Round(time.Millisecond), end.tokens, end.at.Sub(sigterm).Round(time.Millisecond), drained.Sub(sigterm).Round(time.Millisecond),
		exited.Round(time.Millisecond), dropped.Round(time.Millisecond))
}

// TestClusterSlowJoin: the capability gate with a replica that joins a
// running cluster and loads slowly (--debug-load-delay 3s). A gateway and
// replica B run; A starts. While A loads it is a member but not routable:
// requests go to B, and A's own /v1/cluster (itself loading, B routable)
// agrees with the gateway's /v1/cluster and troupe_cluster_replicas. Once
// loaded, A is routable on the gateway and gets requests. The gateway
// never rendered fail-open.
func TestClusterSlowJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three cluster members")
	}
	ports, common := clusterMembers(t, 3)
	b := startMemberChild(t, "replica-b", ports, 3, 1, common, "--parallel", "2")
	gw := startMemberChild(t, "gateway", ports, 3, 2, common, "--gateway")
	var view clusterView
	if !waitUntil(3*time.Minute, func() bool {
		return getJSON(gw.url+"/v1/cluster", &view) == nil && len(view.Members) == 2 && view.routable() == 1
	}) {
		t.Fatalf("the gateway's /v1/cluster did not show 2 members, 1 routable: %+v", view)
	}
	a := startMemberChild(t, "replica-a", ports, 3, 0, common, "--parallel", "2", "--debug-load-delay", "3s")

	// A is a member, loading, on the gateway.
	if !waitUntil(time.Minute, func() bool {
		return getJSON(gw.url+"/v1/cluster", &view) == nil && view.stateOf(a.remote) != "" && view.stateOf(a.remote) != "unknown"
	}) {
		t.Fatalf("the gateway never saw replica A answer: %+v", view)
	}
	seenLoading := time.Now()
	if s := view.stateOf(a.remote); s != "loading" || view.routable() != 1 {
		t.Fatalf("the gateway first saw replica A %q with %d routable: want loading, 1 (the 3s load was over too soon to tell)", s, view.routable())
	}
	// Requests meanwhile: B answers them all.
	bBefore := metricValue(metricsOf(b.url), "troupe_generated_tokens_total")
	const whileLoading = 3
	for i := 0; i < whileLoading; i++ {
		if a, _, err := postChat(gw.url, chatBody(1, fmt.Sprintf("while A loads %d", i))); err != nil || len(a.Choices) != 1 {
			t.Fatalf("a request while A loads: %v %+v", err, a)
		}
	}
	gm := metricsOf(gw.url)
	var av clusterView
	if !waitUntil(10*time.Second, func() bool { return getJSON(a.url+"/v1/cluster", &av) == nil && len(av.Members) == 3 }) {
		t.Fatalf("replica A's /v1/cluster: %+v", av)
	}
	// Still loading after all that: the requests cannot have been A's.
	if s := av.stateOf(a.remote); s != "loading" {
		t.Fatalf("replica A lists itself %q after the requests: the 3s load was over too soon to tell", s)
	}
	if got := metricValue(metricsOf(b.url), "troupe_generated_tokens_total") - bBefore; got != whileLoading {
		t.Errorf("B generated %v tokens for the %d one-token requests sent while A loaded", got, whileLoading)
	}
	if av.stateOf(b.remote) != "routable" || av.routable() != 1 || av.stateOf(gw.remote) != "gateway" {
		t.Errorf("replica A's view while loading: %+v; want B routable, the gateway a gateway, itself loading", av)
	}
	// The gateway's metrics agree with A's view.
	for state, want := range map[string]float64{"routable": float64(av.routable()), "loading": 1, "draining": 0} {
		if got := metricValue(gm, `troupe_cluster_replicas{state="`+state+`"}`); got != want {
			t.Errorf("while A loads, the gateway's troupe_cluster_replicas{state=%q} is %v, want %v", state, got, want)
		}
	}

	// Loaded: routable on the gateway, and it gets requests.
	if !waitUntil(time.Minute, func() bool {
		return getJSON(gw.url+"/v1/cluster", &view) == nil && view.stateOf(a.remote) == "routable" && view.routable() == 2
	}) {
		t.Fatalf("replica A never became routable on the gateway: %+v", view)
	}
	loaded, ok1 := logTime(a.Out.String(), `msg="model ready"`)
	routable, ok2 := logTime(gw.Out.String(), `msg="cluster node: replica routable"`, "member="+av.Self)
	if ok1 && ok2 {
		t.Logf("replica A: seen loading on the gateway for %v; model ready to routable on the gateway: %v",
			loaded.Sub(seenLoading).Round(time.Millisecond), routable.Sub(loaded).Round(time.Millisecond))
	} else {
		t.Errorf("no log of A's load end (%v) or of its routability on the gateway (%v)", ok1, ok2)
	}
	aBefore := metricValue(metricsOf(a.url), "troupe_generated_tokens_total")
	// 16 conversations, each opening differently from its first tokens:
	// none finds a cached prefix, so each goes where rendezvous hashing of
	// its opening puts it, on A for half of them (all 16 on B: 2^-16).
	for i := 0; i < 16; i++ {
		if a, _, err := postChat(gw.url, chatBody(1, fmt.Sprintf("%d: once A is loaded", i))); err != nil || len(a.Choices) != 1 {
			t.Fatalf("a request once A is loaded: %v %+v", err, a)
		}
	}
	if got := metricValue(metricsOf(a.url), "troupe_generated_tokens_total") - aBefore; got <= 0 {
		t.Errorf("replica A generated nothing of 16 requests once routable")
	}
	gm = metricsOf(gw.url)
	if v := metricValue(gm, `troupe_history_renders_total{outcome="fail_open"}`); v != 0 {
		t.Errorf("the gateway rendered fail-open %v times", v)
	}
	if v := metricValue(gm, `troupe_history_renders_total{outcome="skipped_dense"}`); v <= 0 {
		t.Errorf("the gateway's preparers counted no skipped_dense decision (%v): did they adopt the capability?", v)
	}
	if v := metricValue(gm, `troupe_cluster_replicas{state="routable"}`); v != 2 {
		t.Errorf("the gateway's troupe_cluster_replicas{state=\"routable\"} is %v once A loaded, want 2", v)
	}
}
