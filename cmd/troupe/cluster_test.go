package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/troupe-ai/troupe/internal/childproc"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/cluster/node"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// The cluster test runs each member as `troupe serve` in a child process:
// this test binary re-executed with serveChildEnv set to its arguments
// (JSON). A replica killed with SIGKILL must be a process of its own, and
// the pinned protoactor-go races with itself in every cluster member
// (cluster/node/doc.go), so the members' race reports are read here and
// only those through troupe's code fail the test.
const serveChildEnv = "TROUPE_TEST_SERVE_ARGS"

func TestMain(m *testing.M) {
	if args := os.Getenv(serveChildEnv); args != "" {
		os.Exit(runServeChild(args))
	}
	os.Exit(m.Run())
}

// runServeChild runs cmdServe until its stdin closes (the parent ended)
// or it gets SIGTERM, as troupe's main does.
func runServeChild(args string) int {
	var argv []string
	if err := json.Unmarshal([]byte(args), &argv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	sig, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(sig)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	if err := cmdServe(ctx, argv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		return 1
	}
	return 0
}

// serveChild is one `troupe serve` child.
type serveChild struct {
	*childproc.Process
	url    string // its HTTP server
	remote string // its cluster remote address
}

func startServe(t *testing.T, name string, httpPort, remotePort int, args ...string) *serveChild {
	t.Helper()
	args = append(args, "--port", strconv.Itoa(httpPort), "--cluster-port", strconv.Itoa(remotePort))
	b, _ := json.Marshal(args)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = []string{serveChildEnv + "=" + string(b)}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TROUPE_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return &serveChild{Process: childproc.Start(t, name, cmd, 15*time.Second, nil),
		url: fmt.Sprintf("http://127.0.0.1:%d", httpPort), remote: fmt.Sprintf("127.0.0.1:%d", remotePort)}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	for len(ports) < n {
		p, err := node.FreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports
}

// clusterView is the part of GET /v1/cluster the test reads.
type clusterView struct {
	Self    string `json:"self"`
	Members []struct {
		ID         string `json:"id"`
		Address    string `json:"address"`
		Model      string `json:"model"`
		Capability string `json:"capability"`
		Routable   bool   `json:"routable"`
		State      string `json:"state"`
		Self       bool   `json:"self"`
		Load       *struct {
			Waiting int `json:"waiting"`
			Running int `json:"running"`
		} `json:"load"`
	} `json:"members"`
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func (v *clusterView) routable() int {
	n := 0
	for _, m := range v.Members {
		if m.Routable {
			n++
		}
	}
	return n
}

// chatAnswer is the part of a chat completion the test reads.
type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		Details      struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

func chatBody(maxTokens int, turns ...string) string {
	var msgs []map[string]string
	for i, s := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, map[string]string{"role": role, "content": s})
	}
	b, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": maxTokens, "temperature": 0})
	return string(b)
}

func postChat(url, body string) (chatAnswer, int, error) {
	var a chatAnswer
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return a, 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return a, resp.StatusCode, fmt.Errorf("%s: %s", resp.Status, data)
	}
	return a, 200, json.Unmarshal(data, &a)
}

func waitUntil(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

// openStream posts a streamed chat completion to url and returns its lines
// once the first has come (the body is closed when the test ends).
func openStream(t *testing.T, url, body string) *bufio.Scanner {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	lines := bufio.NewScanner(resp.Body)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	if !lines.Scan() {
		t.Fatalf("the stream ended at once: %v", lines.Err())
	}
	return lines
}

// quantile is the q-quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Microsecond)
}

// singleNode serves a model (dir, named name; "" for the demo model) as the
// replicas do, without a cluster, in this process; it returns its URL.
func singleNode(t *testing.T, dir, name string) string {
	t.Helper()
	rt, err := troupe.Start(context.Background(), troupe.Options{Model: dir, ServedName: name, Threads: 1, KVBudget: 64 << 20, Parallel: 1,
		PromptCache: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := troupehttp.New(rt, troupehttp.Config{Parallel: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		_ = srv.Shutdown(5 * time.Second)
		rt.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if !waitUntil(time.Minute, func() bool { st, err := rt.Status(ctx); return err == nil && st.Ready }) {
		t.Fatal("the single node's model did not load")
	}
	return "http://" + ln.Addr().String()
}

// TestClusterGateway: two replicas of the demo model, a gateway-only member
// (`serve --gateway` with no model: it takes the tokenizer and the chat
// template from a replica, and loads no weights) and a replica of a second
// model (a tiny Mamba: snapshot reuse), each `troupe serve` in a child
// process, on loopback. Chat completions through the gateway's HTTP
// succeed; every member serves both models (a request is routed by the
// model it names, from the gateway or from a replica of the other model);
// a conversation's second turn reuses as many cached tokens as on a single
// node (the gateway routes it to the replica holding its prefix), and a
// snapshot model's conversation resumes from its snapshot through the
// gateway, which renders its history boundary; /v1/cluster lists the
// members; a replica killed with SIGKILL ends the stream it was running
// with an error, and the request queued on it that had no token yet is
// answered by the other replica.
func TestClusterGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four cluster members")
	}
	mamba := t.TempDir()
	if _, err := runCLI(t, "model", "init", "--arch", "mamba", "--byte-tokenizer", "--seed", "5", "--out", mamba); err != nil {
		t.Fatal(err)
	}
	ports := freePorts(t, 12)
	peers := fmt.Sprintf("127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", ports[0], ports[1], ports[2], ports[3])
	common := []string{"--cluster-provider", "automanaged", "--cluster-peers", peers, "--threads", "1",
		"--kv-budget", "64MiB", "--kv-prefault=false", "--stats-interval", "0", "--log-level", "info"}
	member := func(name string, i int, args ...string) *serveChild {
		return startServe(t, name, ports[4+i], ports[8+i], append(slices.Clone(common),
			append([]string{"--cluster-provider-port", strconv.Itoa(ports[i])}, args...)...)...)
	}
	replicas := []*serveChild{member("replica-a", 0, "--parallel", "1"), member("replica-b", 1, "--parallel", "1")}
	gw := member("gateway", 2, "--gateway", "--served-model-name", "troupe-demo")
	other := member("replica-mamba", 3, "--model", mamba, "--served-model-name", "tiny-mamba", "--prompt-cache")

	// The gateway sees the four members and the three replicas routable.
	began := time.Now()
	var view clusterView
	if !waitUntil(3*time.Minute, func() bool {
		return getJSON(gw.url+"/v1/cluster", &view) == nil && len(view.Members) == 4 && view.routable() == 3
	}) {
		t.Fatalf("the gateway's /v1/cluster did not show 4 members, 3 routable: %+v", view)
	}
	t.Logf("cluster formed in %v", time.Since(began).Round(time.Millisecond))
	if !strings.Contains(gw.Out.String(), "model assets taken from a replica") {
		t.Fatal("the gateway did not take the model's assets from a replica")
	}
	for _, m := range view.Members {
		switch {
		case m.Routable && m.Address == other.remote:
			if m.Model != "tiny-mamba" || m.Capability != "snapshot" || m.Load == nil {
				t.Fatalf("replica %+v: want tiny-mamba, snapshot, with its load", m)
			}
		case m.Routable && (m.Model != "troupe-demo" || m.Capability != "dense_kv_prefix" || m.Load == nil):
			t.Fatalf("replica %+v: want troupe-demo, dense_kv_prefix, with its load", m)
		case !m.Routable && m.ID != view.Self:
			t.Fatalf("member %s is not routable and not the gateway %s", m.ID, view.Self)
		}
	}
	// Every member serves both models: /v1/models lists them (once it took
	// the other model's assets from its replica).
	for _, c := range []*serveChild{gw, replicas[0], other} {
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		if !waitUntil(time.Minute, func() bool {
			return getJSON(c.url+"/v1/models", &list) == nil && len(list.Data) == 2
		}) {
			t.Fatalf("%s's /v1/models does not list both models: %+v", c.Name, list)
		}
		if ids := []string{list.Data[0].ID, list.Data[1].ID}; !slices.Contains(ids, "troupe-demo") || !slices.Contains(ids, "tiny-mamba") {
			t.Fatalf("%s's /v1/models: %q", c.Name, ids)
		}
	}
	// A request names its model: the gateway and a replica of the demo
	// model route tiny-mamba's to its replica, and the mamba replica routes
	// the demo model's to a demo replica.
	for _, x := range []struct {
		c     *serveChild
		model string
	}{{gw, "tiny-mamba"}, {replicas[0], "tiny-mamba"}, {other, "troupe-demo"}, {gw, "troupe-demo"}} {
		body := `{"model":"` + x.model + `","max_tokens":2,"messages":[{"role":"user","content":"which model?"}]}`
		resp, err := http.Post(x.c.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct{ Model string }
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || a.Model != x.model {
			t.Fatalf("%s asked for %s: %d %q %v", x.c.Name, x.model, resp.StatusCode, a.Model, err)
		}
	}
	// The gateway knows the replicas' length limits: it lists them, and
	// refuses a request no replica can run with a 400 before routing it,
	// even a stream.
	var models struct {
		Data []struct {
			ID     string `json:"id"`
			MaxLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := getJSON(gw.url+"/v1/models", &models); err != nil {
		t.Fatal(err)
	}
	for _, m := range models.Data {
		if want := map[string]int{"troupe-demo": 4096, "tiny-mamba": 2048}[m.ID]; m.MaxLen != want {
			t.Fatalf("the gateway lists %s with max_model_len %d, want %d", m.ID, m.MaxLen, want)
		}
	}
	resp, err := http.Post(gw.url+"/v1/chat/completions", "application/json", strings.NewReader(
		`{"model":"tiny-mamba","stream":true,"max_tokens":3000,"messages":[{"role":"user","content":"too long"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	tooLong, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(tooLong), "2048") {
		t.Fatalf("a stream past tiny-mamba's 2048 positions through the gateway: %d %s", resp.StatusCode, tooLong)
	}
	// A snapshot model's conversation through the gateway resumes from the
	// snapshot its first turn left on the replica.
	mambaTurn := func(url string, msgs ...string) chatAnswer {
		var m []map[string]string
		for i, s := range msgs {
			m = append(m, map[string]string{"role": []string{"user", "assistant"}[i%2], "content": s})
		}
		b, _ := json.Marshal(map[string]any{"model": "tiny-mamba", "messages": m, "max_tokens": 4, "temperature": 0,
			"prompt_cache_key": "conversation-1"})
		a, _, err := postChat(url, string(b))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	first := "a first question for the state-space model"
	m1 := mambaTurn(gw.url, first)
	m2 := mambaTurn(gw.url, first, m1.Choices[0].Message.Content, "a second one")
	one := singleNode(t, mamba, "tiny-mamba")
	o1 := mambaTurn(one, first)
	o2 := mambaTurn(one, first, o1.Choices[0].Message.Content, "a second one")
	// Its turn 2 resumes from the snapshot turn 1 left: at least turn 1's
	// prompt, as on one node.
	for _, c := range []struct {
		where  string
		t1, t2 chatAnswer
	}{{"through the gateway", m1, m2}, {"on one node", o1, o2}} {
		if c.t2.Usage.Details.Cached < c.t1.Usage.PromptTokens {
			t.Fatalf("the snapshot model's turn 2 reused %d of %d prompt tokens %s: want at least turn 1's %d",
				c.t2.Usage.Details.Cached, c.t2.Usage.PromptTokens, c.where, c.t1.Usage.PromptTokens)
		}
	}
	t.Logf("tiny-mamba turn 2 resumed from a snapshot of %d of %d prompt tokens through the gateway, %d of %d on one node",
		m2.Usage.Details.Cached, m2.Usage.PromptTokens, o2.Usage.Details.Cached, o2.Usage.PromptTokens)

	// Every member answers /v1/cluster.
	for _, r := range replicas {
		var rv clusterView
		if !waitUntil(30*time.Second, func() bool { return getJSON(r.url+"/v1/cluster", &rv) == nil && len(rv.Members) == 4 }) {
			t.Fatalf("%s's /v1/cluster: %+v", r.Name, rv)
		}
	}

	// Short requests: through the gateway and on a replica directly.
	var viaGateway, direct []time.Duration
	for i := 0; i < 50; i++ {
		for _, x := range []struct {
			url string
			d   *[]time.Duration
		}{{gw.url, &viaGateway}, {replicas[0].url, &direct}} {
			t0 := time.Now()
			a, _, err := postChat(x.url, chatBody(1, fmt.Sprintf("ping %d", i)))
			if err != nil || len(a.Choices) != 1 {
				t.Fatalf("POST %s: %v %+v", x.url, err, a)
			}
			*x.d = append(*x.d, time.Since(t0))
		}
	}
	t.Logf("short chat completion (1 token), 50 each, p50/p99: through the gateway %v/%v, on a replica directly %v/%v",
		quantile(viaGateway, 0.5), quantile(viaGateway, 0.99), quantile(direct, 0.5), quantile(direct, 0.99))

	// A conversation through the gateway, and the same on a single node
	// that has not seen it.
	converse := func(url, topic string) (turn1, turn2 chatAnswer) {
		first := topic + " is the subject of this long opening message, long enough to fill several KV pages of sixteen tokens."
		var err error
		if turn1, _, err = postChat(url, chatBody(8, first)); err != nil {
			t.Fatal(err)
		}
		if turn2, _, err = postChat(url, chatBody(8, first, turn1.Choices[0].Message.Content, "and then?")); err != nil {
			t.Fatal(err)
		}
		return
	}
	// Turn 2 reuses at least the full KV pages of turn 1's prompt, as on
	// one node; a turn routed to the other replica would reuse only what
	// every chat shares (a few tokens of the template). Greedy answers
	// may differ between the two (a prefill split differently by what is
	// cached rounds differently), so each is judged on its own turns.
	probes := func() float64 {
		var m bytes.Buffer
		if resp, err := http.Get(gw.url + "/metrics"); err == nil {
			_, _ = io.Copy(&m, resp.Body)
			resp.Body.Close()
		}
		return metricValue(m.String(), "troupe_route_probes_total")
	}
	probesBefore := probes()
	g1, g2 := converse(gw.url, "Alpha")
	// The gateway routed on the replicas' published states (and what it
	// sent them itself), asking none of them.
	if p := probes(); p != probesBefore || p < 0 {
		t.Fatalf("the gateway probed replicas %v times for the conversation (%v before): want none, their states published", p-probesBefore, probesBefore)
	}
	d1, d2 := converse(singleNode(t, "", ""), "Alpha")
	for _, c := range []struct {
		where  string
		t1, t2 chatAnswer
	}{{"through the gateway", g1, g2}, {"on one node", d1, d2}} {
		if want := c.t1.Usage.PromptTokens / 16 * 16; want == 0 || c.t2.Usage.Details.Cached < want {
			t.Fatalf("turn 2 cached %d of %d tokens %s: want at least the %d of turn 1's prompt in full pages",
				c.t2.Usage.Details.Cached, c.t2.Usage.PromptTokens, c.where, want)
		}
	}
	t.Logf("turn 2 reused %d of %d prompt tokens through the gateway, %d of %d on one node", g2.Usage.Details.Cached, g2.Usage.PromptTokens,
		d2.Usage.Details.Cached, d2.Usage.PromptTokens)

	// A replica dies: R0 leaves its prompt cached on one replica (the
	// victim), S1 streams there (same prefix), R2 (same prefix) queues
	// behind it (--parallel 1). SIGKILL the victim: S1 ends with an error,
	// R2, which had no token yet, is answered by the other replica.
	prefix := "Charlie opens a conversation whose first message spans a few KV pages, so that it is found again."
	if _, _, err := postChat(gw.url, chatBody(1, prefix)); err != nil {
		t.Fatal(err)
	}
	lines := openStream(t, gw.url, `{"stream":true,"max_tokens":3800,"ignore_eos":true,"temperature":0,"messages":[{"role":"user","content":`+
		strconv.Quote(prefix)+`},{"role":"assistant","content":"ok"},{"role":"user","content":"now talk for long"}]}`)
	busy := func(waiting int) *serveChild {
		var v clusterView
		if getJSON(gw.url+"/v1/cluster", &v) != nil {
			return nil
		}
		for _, m := range v.Members {
			if m.Load != nil && m.Load.Running == 1 && m.Load.Waiting >= waiting {
				for _, r := range replicas {
					if r.remote == m.Address {
						return r
					}
				}
			}
		}
		return nil
	}
	var victim *serveChild
	if !waitUntil(20*time.Second, func() bool { victim = busy(0); return victim != nil }) {
		t.Fatal("no replica reports the stream running")
	}
	type answer struct {
		a    chatAnswer
		code int
		err  error
	}
	r2 := make(chan answer, 1)
	go func() {
		a, code, err := postChat(gw.url, chatBody(4, prefix, "ok", "a short one"))
		r2 <- answer{a, code, err}
	}()
	if !waitUntil(20*time.Second, func() bool { return busy(1) == victim }) {
		t.Fatalf("the second request did not queue on %s, the replica holding its prefix", victim.Name)
	}
	// 16 more streams with the same prefix: the victim holds it, so they
	// go there until its load passes the other's by the policy's
	// threshold, and wait behind S1 and R2 when it dies.
	type streamEnd struct {
		chunks int
		done   bool
		errEv  string
		err    error
	}
	ends := make(chan streamEnd, 16)
	for i := range 16 {
		go func() {
			var e streamEnd
			defer func() { ends <- e }()
			body := fmt.Sprintf(`{"stream":true,"max_tokens":96,"ignore_eos":true,"messages":[{"role":"user","content":%q},`+
				`{"role":"assistant","content":"ok"},{"role":"user","content":"stream %d of sixteen"}]}`, prefix, i)
			client := &http.Client{Timeout: 90 * time.Second}
			resp, err := client.Post(gw.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				e.err = err
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				switch line := sc.Text(); {
				case line == "data: [DONE]":
					e.done = true
				case strings.Contains(line, `"error"`):
					e.errEv = line
				case strings.Contains(line, `"content"`):
					e.chunks++
				}
			}
			e.err = sc.Err()
		}()
	}
	if !waitUntil(20*time.Second, func() bool { return busy(3) == victim }) {
		t.Fatalf("the 16 streams did not queue on %s", victim.Name)
	}
	killed := time.Now()
	if err := victim.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.Exited
	var streamErr string
	tokens := 0
	for lines.Scan() {
		line := lines.Text()
		if strings.Contains(line, `"error"`) {
			streamErr = line
		} else if strings.Contains(line, `"content"`) {
			tokens++
		}
	}
	if streamErr == "" || tokens == 0 {
		t.Fatalf("the running stream ended without an error event after %d chunks", tokens)
	}
	t.Logf("the stream on the killed replica ended with an error %v after the kill: %s", time.Since(killed).Round(time.Millisecond), streamErr)
	select {
	case a := <-r2:
		if a.err != nil || len(a.a.Choices) != 1 {
			t.Fatalf("the request queued on the killed replica: %d %v", a.code, a.err)
		}
		t.Logf("the request queued on the killed replica was answered by the other %v after the kill", time.Since(killed).Round(time.Millisecond))
		if !strings.Contains(gw.Out.String(), "routing again") {
			t.Fatal("the gateway did not log the retry of the queued request")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request queued on the killed replica was not answered")
	}
	// Not one of the 16 streams is lost or hangs: those queued on the
	// victim had no token yet and were answered by the other replica.
	for range 16 {
		select {
		case e := <-ends:
			if e.err != nil || !e.done || e.errEv != "" || e.chunks == 0 {
				t.Fatalf("a stream of the 16 ended with %d chunks, [DONE] %v, error event %q, err %v", e.chunks, e.done, e.errEv, e.err)
			}
		case <-time.After(90 * time.Second):
			t.Fatal("a stream of the 16 did not end within 90s of the kill")
		}
	}
	retried := strings.Count(gw.Out.String(), "routing again") - 1 // less R2's
	if retried < 1 {
		t.Fatal("none of the 16 streams was retried: none waited on the killed replica")
	}
	t.Logf("the 16 concurrent streams all completed, %v after the kill; %d of them had been queued on the killed replica and were routed again",
		time.Since(killed).Round(time.Millisecond), retried)
	// The gateway sees the victim leave, and still serves.
	if !waitUntil(15*time.Second, func() bool {
		var v clusterView
		return getJSON(gw.url+"/v1/cluster", &v) == nil && len(v.Members) == 3 && v.routable() == 2
	}) {
		t.Fatal("the gateway still lists the killed replica")
	}
	if _, _, err := postChat(gw.url, chatBody(2, "after the kill")); err != nil {
		t.Fatal(err)
	}
	// The victim restarts on its old addresses, loading slowly: the
	// gateway lists it as loading, not routable, until its CapabilityReady
	// comes, then routes to it.
	idx := slices.Index(replicas, victim)
	back := member(victim.Name+"-restarted", idx, "--parallel", "1", "--debug-load-delay", "5s")
	restarted := time.Now()
	sawLoading := false
	if !waitUntil(time.Minute, func() bool {
		var v clusterView
		if getJSON(gw.url+"/v1/cluster", &v) != nil {
			return false
		}
		for _, m := range v.Members {
			if m.Address == back.remote {
				if m.State == "loading" && !m.Routable {
					sawLoading = true
				}
				return m.Routable
			}
		}
		return false
	}) {
		t.Fatal("the restarted replica did not become routable on the gateway")
	}
	if !sawLoading {
		t.Fatal("the gateway never listed the restarted replica as loading before it was routable")
	}
	t.Logf("the restarted replica was routable on the gateway %v after its start (5s of it the slowed load)", time.Since(restarted).Round(time.Millisecond))
	served := func() bool {
		var m bytes.Buffer
		resp, err := http.Get(back.url + "/metrics")
		if err != nil {
			return false
		}
		_, _ = io.Copy(&m, resp.Body)
		resp.Body.Close()
		return metricValue(m.String(), "troupe_prompt_tokens_total") > 0
	}
	for i := 0; i < 24 && !served(); i++ {
		if _, _, err := postChat(gw.url, chatBody(1, strings.Repeat("x", i+1)+" after the restart")); err != nil {
			t.Fatal(err)
		}
	}
	if !served() {
		t.Fatal("24 requests through the gateway, none routed to the restarted replica")
	}
	var metrics bytes.Buffer
	if resp, err := http.Get(gw.url + "/metrics"); err == nil {
		_, _ = io.Copy(&metrics, resp.Body)
		resp.Body.Close()
	}
	// Routing decisions by reason; the gateway's preparers adopted the
	// replicas' capability (dense KV: no history render; snapshot: one
	// render per chat request), not fail-open.
	for _, want := range []string{`troupe_route_decisions_total{reason="prefix-hit"}`, `troupe_route_decisions_total{reason="sticky"}`,
		`troupe_history_renders_total{outcome="skipped_dense"}`, `troupe_history_renders_total{outcome="rendered"}`} {
		if metricValue(metrics.String(), want) <= 0 {
			t.Errorf("the gateway's /metrics has no positive %s:\n%s", want, metrics.String())
		}
	}
}

// metricValue is the value of the sample named (with its labels) series in
// a Prometheus text exposition; -1 when absent.
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
