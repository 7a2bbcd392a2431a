package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/cluster/gateway"
	"github.com/troupe-ai/troupe/cluster/node"
	"github.com/troupe-ai/troupe/gguf"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/kvcache"
	"golang.org/x/term"
)

// serveAlias maps the flag names people type by habit from other servers
// (llama-server's -m and -c/--ctx-size), each sharing its canonical
// flag's value.
func serveAlias(name string) (canonical string, ok bool) {
	switch name {
	case "m":
		return "model", true
	case "c", "ctx-size":
		return "max-model-len", true
	case "no-model":
		return "gateway", true
	}
	return "", false
}

// envFlags fills unset flags from TROUPE_<NAME> environment variables
// (dashes become underscores): flags on the command line win. Aliases have
// no variable of their own.
func envFlags(fs *flag.FlagSet, set map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := serveAlias(f.Name); set[f.Name] || alias || err != nil {
			return
		}
		key := "TROUPE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(key); ok {
			if e := f.Value.Set(v); e != nil {
				err = fmt.Errorf("%s=%q: %w", key, v, e)
			}
		}
	})
	return err
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "model folder or Hugging Face Hub repository org/name (or give it as the argument: serve DIR); default: the built-in demo model")
	fs.StringVar(dir, "m", "", "same as --model")
	maxModelLen := fs.Int("max-model-len", 0, "most tokens one request may use, prompt plus output (0 = the model's max_position_embeddings)")
	fs.IntVar(maxModelLen, "ctx-size", 0, "same as --max-model-len")
	fs.IntVar(maxModelLen, "c", 0, "same as --max-model-len")
	name := fs.String("served-model-name", "", "model name in the API (default: the folder's name, or org/name for a Hub model); on a --gateway without --model, the model it takes first and serves when a request names none (default: the first replica's)")
	revision := fs.String("revision", "main", "branch, tag or commit of a Hub model (org/name)")
	tmpl := fs.String("chat-template", "", "chat template file overriding the model's")
	host := fs.String("host", "127.0.0.1", "listen address (0.0.0.0: every interface)")
	port := fs.Int("port", 8080, "listen port")
	parallel := fs.Int("parallel", 16, "max sequences running at once")
	kvBudget := fs.String("kv-budget", "1GiB", "memory for per-sequence state: KV pages, recurrent-state slots and prompt-cache snapshots together (bytes, or with KiB/MiB/GiB)")
	snapBudget := fs.String("snapshot-budget", "", "share of --kv-budget for prompt-cache snapshots on state-space and hybrid models (default: a quarter)")
	prefaultKV := fs.Bool("kv-prefault", true, "commit the KV pool's memory at startup, as llama.cpp and vLLM do, so the first requests do not pay for page faults (false: commit it as it fills)")
	promptCache := fs.Bool("prompt-cache", true, "reuse prompt state across requests")
	boundary := actors.BoundarySnapshotsAuto
	fs.Var(&boundary, "boundary-snapshots", "history-boundary snapshots, `auto|off`: auto (the default) lets the model's cache decide (rendered on state-space and hybrid models and while the model loads, never on dense-KV models); off is a kill switch: no history-boundary render on any path, and no next-turn warm-up or shared-prefix snapshot of n > 1 choices on a model that may reuse by snapshots (dense-KV prefix sharing is kept)")
	genConfig := fs.String("generation-config", "auto", "where unset sampling parameters come from: auto (the model's generation_config.json: temperature, top_p, top_k, min_p, repetition_penalty) or none (the server's defaults; vllm is accepted for none)")
	apiKey := fs.String("api-key", "", "required bearer token(s), comma-separated (default: none); each key sees only its own stored responses and cached prompts")
	adminKey := fs.String("admin-key", "", "key for POST /v1/cache/reset (also accepted as an API key); with --api-key and no admin key the reset is refused")
	maxQueue := fs.Int("max-queue", 64, "requests that may wait beyond the running ones before 429")
	threads := fs.Int("threads", 0, "compute threads (0 = all cores)")
	device := fs.String("device", "cpu", "compute device: cpu, or cuda[:N] for CUDA device N (0 when not given), in a binary built with -tags cuda")
	mmapWeights := fs.Bool("mmap", false, "keep the weights memory-mapped from the checkpoint instead of copying them into huge-page memory (slower decode, no private copy)")
	noPacked := fs.Bool("no-packed-weights", false, "do not give layer matrices packed copies at load (BF16 panels for prefill, quantized matrices in the batch-decode layout): saves as much memory again as those matrices, at the cost of slower prefill and batch decode")
	quantize := fs.String("quantize", "", "quantize the weight matrices at load: "+quantizeTypes+" (default: keep their types; a GGUF file's quantized matrices stay as they are)")
	stepTokens := fs.Int("step-tokens", 512, "tokens per engine step (chunked prefill budget)")
	stepStretch := fs.Float64("step-stretch", 2, "while streams decode, prefill only what keeps a step within this many decode steps, so inter-token gaps stay smooth (1: off, prefill takes all of --step-tokens)")
	storeTTL := fs.Duration("responses-ttl", time.Hour, "how long stored Responses-API responses are kept")
	storeMax := fs.Int("responses-max", 1024, "most stored Responses-API responses (oldest evicted first)")
	storeBytes := fs.String("responses-max-bytes", "256MiB", "most bytes of stored Responses-API responses, approximately (oldest evicted first)")
	loadDelay := fs.Duration("debug-load-delay", 0, "testing: delay the weight load by this long")
	prepTimeout := fs.Duration("prepare-timeout", 30*time.Second, "longest wait for a preparer to render and tokenize a request (503 past it)")
	maxInspections := fs.Int("max-inspections", 0, "inspection requests (tokenize, detokenize, apply-template, input_tokens, count_tokens) in flight before 429 (0 = 16 or 2 per preparer)")
	inspectIn := fs.String("inspect-max-input", "1MiB", "largest inspection input: bytes of text, or that many tokens for /detokenize (413 past it)")
	inspectOut := fs.String("inspect-max-output", "16MiB", "largest inspection answer in bytes (413 past it)")
	stallTimeout := fs.Duration("stall-timeout", time.Minute, "queued work waiting this long for an engine step turns /ready to 503 (0: off)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	statsEvery := fs.Duration("stats-interval", 10*time.Second, "log a stats line (running, waiting, tokens/s, cache hits, KV use) this often while busy, at info level (0: off)")
	readTimeout := fs.Duration("read-timeout", 30*time.Second, "longest time to receive one request, headers and body (408 past it)")
	writeTimeout := fs.Duration("write-timeout", 60*time.Second, "longest time to send one non-streamed response")
	idleTimeout := fs.Duration("idle-timeout", 60*time.Second, "close keep-alive connections idle this long")
	maxHeader := fs.Int("max-header-bytes", 16<<10, "largest request headers in bytes (431 past it)")
	maxConns := fs.Int("max-conns", 0, "most open connections; more wait in the listen backlog (0 = three quarters of the open file limit)")
	stall := fs.Duration("stream-stall-timeout", 30*time.Second, "cancel a stream whose client reads nothing for this long")
	shutdownTimeout := fs.Duration("shutdown-timeout", 30*time.Second, "on SIGINT/SIGTERM, how long in-flight requests may finish before they are cut")
	clusterProvider := fs.String("cluster-provider", "", "join a troupe cluster through this membership provider: automanaged (every member polls --cluster-peers), etcd (members hold leased keys in --etcd-endpoints) or k8s (in a pod: members label their pods; see deploy/k8s); default: none, a single process")
	etcdEndpoints := fs.String("etcd-endpoints", "", "cluster, etcd provider: etcd client URLs or host:port, comma-separated")
	etcdPrefix := fs.String("etcd-prefix", "/troupe", "cluster, etcd provider: the key prefix members register under")
	clusterPeers := fs.String("cluster-peers", "", "cluster: every member's provider host:port, this one's included, comma-separated")
	clusterProviderPort := fs.Int("cluster-provider-port", 0, "cluster: this member's provider port (automanaged: a health endpoint on every interface), as --cluster-peers names it")
	clusterHost := fs.String("cluster-host", "127.0.0.1", "cluster: where this member's remote (gRPC) listens")
	clusterPort := fs.Int("cluster-port", 0, "cluster: this member's remote (gRPC) port (0: any free port)")
	clusterAdvertise := fs.String("cluster-advertise", "", "cluster: the host:port other members reach this member's remote at, when it is not --cluster-host:--cluster-port (0.0.0.0, NAT, containers)")
	clusterName := fs.String("cluster-name", "troupe", "cluster: members of different clusters ignore each other")
	gatewayOnly := fs.Bool("gateway", false, "cluster: serve as a gateway only: take the model's tokenizer and chat template (not its weights) from the first replica, or from --model DIR when given, prepare each request here and route it to a replica of the cluster")
	fs.BoolVar(gatewayOnly, "no-model", false, "same as --gateway")
	fs.Usage = func() { serveUsage(fs) }
	// Flags may come before or after the model (serve DIR --port 9000).
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if canon, ok := serveAlias(f.Name); ok {
			set[canon] = true
		}
	})
	switch {
	case len(positional) > 1:
		return fmt.Errorf("serve: unexpected argument %q: give one model folder (serve [DIR] [flags])", positional[1])
	case len(positional) == 1 && set["model"] && *dir != positional[0]:
		return fmt.Errorf("serve: two models given, %q and --model %q", positional[0], *dir)
	case len(positional) == 1:
		*dir = positional[0]
		set["model"] = true
	}
	if err := envFlags(fs, set); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hubRepo := ""
	if name0, ok := strings.CutPrefix(*dir, ollamaPrefix); ok {
		path, err := resolveModel(*dir)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if *dir = path; *name == "" {
			*name = name0 // as Ollama names it
		}
	}
	if isHubModel(*dir) {
		hubRepo = *dir
	} else if err := checkModelDir(*dir); err != nil {
		return fmt.Errorf("serve: %w", err)
	} else if set["revision"] {
		return errors.New("serve: --revision applies to a Hub model (org/name), not a local folder")
	}
	qtype, err := parseQuantize(*quantize)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	budget, err := parseBytes(*kvBudget)
	if err != nil {
		return fmt.Errorf("serve: --kv-budget: %w", err)
	}
	var snaps int64
	if *snapBudget != "" {
		if snaps, err = parseBytes(*snapBudget); err != nil {
			return fmt.Errorf("serve: --snapshot-budget: %w", err)
		}
		if snaps >= budget {
			return fmt.Errorf("serve: --snapshot-budget %s must be less than --kv-budget %s", *snapBudget, *kvBudget)
		}
	}
	storeBudget, err := parseBytes(*storeBytes)
	if err != nil {
		return fmt.Errorf("serve: --responses-max-bytes: %w", err)
	}
	if *statsEvery < 0 {
		return fmt.Errorf("serve: --stats-interval must be >= 0, got %v", *statsEvery)
	}
	if *stepStretch < 1 {
		return fmt.Errorf("serve: --step-stretch must be >= 1 (1: off), got %v", *stepStretch)
	}
	if *maxModelLen < 0 {
		return fmt.Errorf("serve: --max-model-len must be >= 0, got %d", *maxModelLen)
	}
	if *parallel < 1 || *maxQueue < 0 || *port < 0 || *port > 65535 || *threads < 0 || *stepTokens < 1 || *storeTTL <= 0 || *storeMax < 1 || *stallTimeout < 0 {
		return errors.New("serve: --parallel, --step-tokens and --responses-max must be >= 1, --responses-ttl > 0, --max-queue, --threads and --stall-timeout >= 0, --port in 0..65535")
	}
	if _, err := troupe.CheckDevice(*device); err != nil {
		return fmt.Errorf("serve: --device: %w", err)
	}
	if *readTimeout <= 0 || *writeTimeout <= 0 || *idleTimeout <= 0 || *stall <= 0 || *shutdownTimeout < 0 || *maxHeader < 1024 || *maxConns < 0 {
		return errors.New("serve: --read-timeout, --write-timeout, --idle-timeout and --stream-stall-timeout must be > 0, --shutdown-timeout >= 0, --max-header-bytes >= 1024, --max-conns >= 0")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("serve: --log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	inMax, err := parseBytes(*inspectIn)
	if err != nil || inMax < 1 {
		return fmt.Errorf("serve: --inspect-max-input must be a positive size: %q", *inspectIn)
	}
	outMax, err := parseBytes(*inspectOut)
	if err != nil || outMax < 1 {
		return fmt.Errorf("serve: --inspect-max-output must be a positive size: %q", *inspectOut)
	}
	if *prepTimeout <= 0 || *maxInspections < 0 {
		return errors.New("serve: --prepare-timeout must be > 0 and --max-inspections >= 0")
	}
	if *stallTimeout == 0 {
		*stallTimeout = -1 // the runtime's "off"
	}
	var peers []string
	for _, p := range strings.Split(*clusterPeers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			peers = append(peers, p)
		}
	}
	switch {
	case *clusterProvider == "" && (len(peers) > 0 || *gatewayOnly || set["cluster-provider-port"] || set["cluster-port"] || set["cluster-advertise"]):
		return errors.New("serve: --cluster-peers, --cluster-provider-port, --cluster-port, --cluster-advertise and --gateway need --cluster-provider")
	case *clusterProvider != "" && !slices.Contains(node.Providers, *clusterProvider):
		return fmt.Errorf("serve: --cluster-provider %q: want one of %s", *clusterProvider, strings.Join(node.Providers, ", "))
	case *clusterProvider == node.ProviderAutomanaged && (len(peers) == 0 || *clusterProviderPort < 1 || *clusterProviderPort > 65535):
		return errors.New("serve: --cluster-provider automanaged needs --cluster-peers and --cluster-provider-port")
	case *clusterProvider == node.ProviderEtcd && len(node.SplitList(*etcdEndpoints)) == 0:
		return errors.New("serve: --cluster-provider etcd needs --etcd-endpoints")
	case *clusterProvider != node.ProviderEtcd && set["etcd-endpoints"]:
		return errors.New("serve: --etcd-endpoints applies to --cluster-provider etcd")
	case *clusterPort < 0 || *clusterPort > 65535:
		return errors.New("serve: --cluster-port must be in 0..65535")
	}
	if hubRepo != "" {
		snap, err := pullModel(ctx, hubRepo, *revision, stderr, log)
		if err != nil {
			return fmt.Errorf("serve: %s is not a local folder; from the Hub: %w", hubRepo, err)
		}
		if err := checkModelDir(snap.Model); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if *dir = snap.Model; *name == "" {
			*name = hubRepo // as vLLM names a Hub model (with its :QUANT for a GGUF one, as Ollama does)
		}
	}
	opts := troupe.Options{
		Model: *dir, ServedName: *name, ChatTemplate: *tmpl, Threads: *threads, Device: *device, MmapWeights: *mmapWeights, NoPackedWeights: *noPacked, Quantize: qtype, Parallel: *parallel,
		KVBudget: budget, SnapshotBudget: snaps, PrefaultKV: *prefaultKV, StepTokens: *stepTokens, StepStretch: *stepStretch, MaxModelLen: *maxModelLen, PromptCache: *promptCache, BoundarySnapshots: boundary, Logger: log, LoadDelay: *loadDelay,
		StallTimeout: *stallTimeout, PrepareTimeout: *prepTimeout, MaxInspections: *maxInspections, GenerationConfig: *genConfig,
		InspectMaxInput: int(inMax), InspectMaxOutput: int(outMax), LoadProgress: loadBar(stderr),
	}
	var rt *troupe.Runtime
	var clusterStatus func(context.Context) any
	var cm *member // the cluster member, if any
	if *clusterProvider != "" {
		// A gateway given no model takes the assets from a replica.
		member, err := startMember(ctx, opts, node.Config{ClusterName: *clusterName, Host: *clusterHost, Port: *clusterPort,
			Advertise: *clusterAdvertise, ProviderPort: *clusterProviderPort, Peers: peers, Logger: log,
			Provider: *clusterProvider, Etcd: node.EtcdConfig{Endpoints: node.SplitList(*etcdEndpoints), BasePath: *etcdPrefix}},
			*gatewayOnly, !set["model"])
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer member.close()
		rt, cm = member.rt, member
		clusterStatus = func(ctx context.Context) any { return gateway.Status(ctx, member.node) }
	} else {
		var err error
		if rt, err = troupe.Start(ctx, opts); err != nil {
			return err
		}
		defer rt.Close()
	}
	var keys []string
	for _, k := range strings.Split(*apiKey, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	srv := troupehttp.New(rt, troupehttp.Config{APIKeys: keys, AdminKey: strings.TrimSpace(*adminKey), MaxQueue: *maxQueue, Parallel: *parallel,
		ResponsesTTL: *storeTTL, ResponsesMax: *storeMax, ResponsesMaxBytes: storeBudget,
		ReadTimeout: *readTimeout, WriteTimeout: *writeTimeout, IdleTimeout: *idleTimeout, MaxHeaderBytes: *maxHeader,
		MaxConns: *maxConns, StreamStallTimeout: *stall, Logger: log, Cluster: clusterStatus})
	if cm != nil {
		// The models other members serve are served here too, routed to
		// their replicas.
		mctx, stopModels := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); cm.serveModels(mctx, srv.AddModel, log) }()
		defer func() { stopModels(); <-done }()
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("troupe listening", "addr", ln.Addr().String(), "model", rt.Name())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	loadErr := make(chan string, 1)
	go watchLoad(ctx, rt, loadErr)
	go rt.LogStats(ctx, *statsEvery)
	select {
	case err := <-errc:
		return err
	case cause := <-loadErr:
		// A server whose model cannot load only answers 503: stop, and
		// say why, rather than look healthy to a supervisor.
		log.Error("the model failed to load; stopping", "err", cause)
		if err := srv.Shutdown(time.Second); err != nil {
			log.Warn("shutdown", "err", err)
		}
		return fmt.Errorf("serve: the model failed to load: %s", cause)
	case <-ctx.Done():
		log.Info("shutting down: finishing in-flight requests", "timeout", *shutdownTimeout)
		// A replica of a cluster first leaves the routable set, then
		// finishes the jobs gateways routed to it as this server finishes
		// its own requests, within the same timeout; it leaves the
		// cluster after (the deferred close).
		drained := make(chan struct{})
		go func() {
			defer close(drained)
			if cm != nil {
				dctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
				defer cancel()
				cm.drain(dctx, log)
			}
		}()
		if err := srv.Shutdown(*shutdownTimeout); err != nil {
			log.Warn("shutdown", "err", err)
		}
		<-drained
		return nil
	}
}

// serveUsage prints serve's flags, less the testing ones (debug-*), and
// how the environment sets them.
func serveUsage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, "usage: troupe serve [DIR | org/name] [flags]   (flags may also follow the model)\n\n"+
		"Serves DIR (a Hugging Face model folder), a Hugging Face Hub model org/name\n"+
		"(fetched into the Hugging Face cache; HF_TOKEN, HF_HOME, HF_HUB_CACHE,\n"+
		"HF_HUB_OFFLINE and HF_ENDPOINT apply; org/name:QUANT takes one GGUF model\n"+
		"of a repository of GGUF files, Q4_K_M by default), or the built-in demo model.\n"+
		"Every flag can also be set as TROUPE_<FLAG>, dashes as underscores\n"+
		"(TROUPE_KV_BUDGET=2GiB, TROUPE_API_KEY=...); the command line wins.\n"+
		"--host 0.0.0.0 listens on every interface (default: this machine only).\n"+
		"--boundary-snapshots off (TROUPE_BOUNDARY_SNAPSHOTS=off) turns history-\n"+
		"boundary renders and snapshots off everywhere; GET /v1/cache/stats shows it.\n"+
		"Aliases: -m for --model, -c and --ctx-size for --max-model-len,\n"+
		"--no-model for --gateway.\n"+
		"Cluster: --cluster-provider automanaged joins the members named by\n"+
		"--cluster-peers (each member's provider host:port), etcd the members\n"+
		"registered in --etcd-endpoints, k8s the pods of its namespace (see\n"+
		"deploy/k8s); a member serves its\n"+
		"model (a replica), or with --gateway routes every request to a replica\n"+
		"(it takes the tokenizer and chat template from one unless --model is\n"+
		"given). GET /v1/cluster shows the members.\n\nflags:\n")
	shown := flag.NewFlagSet("serve", flag.ContinueOnError)
	shown.SetOutput(w)
	fs.VisitAll(func(f *flag.Flag) {
		if _, alias := serveAlias(f.Name); !alias && !strings.HasPrefix(f.Name, "debug-") {
			shown.Var(f.Value, f.Name, f.Usage)
		}
	})
	shown.PrintDefaults()
}

// watchLoad polls the runtime's load status until the model is ready (then
// it returns) or has failed (then it sends the cause).
func watchLoad(ctx context.Context, rt *troupe.Runtime, failed chan<- string) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := rt.Status(sctx)
		cancel()
		switch {
		case err != nil:
			continue // busy or stopping: ask again
		case st.Ready:
			return
		case st.Error != "":
			failed <- st.Error
			return
		}
	}
}

// checkModelDir names what is wrong with a model folder before anything
// starts: a missing folder, a file given for a folder (a GGUF file, or the
// weights alone), or a folder without config.json or tokenizer.json. ""
// is the built-in demo model.
func checkModelDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("the model folder %s does not exist", dir)
	case err != nil:
		return fmt.Errorf("cannot read the model folder: %w", err)
	case !st.IsDir():
		head := make([]byte, 4)
		if f, err := os.Open(dir); err == nil {
			io.ReadFull(f, head)
			f.Close()
		}
		switch {
		case string(head) == "GGUF":
			return nil // a GGUF model (a .gguf, a split set's first part, an Ollama blob)
		case strings.HasSuffix(dir, ".safetensors"):
			return fmt.Errorf("%s is a weights file: give the folder that holds it with config.json and tokenizer.json", dir)
		}
		return fmt.Errorf("%s is neither a GGUF file nor a model folder (config.json, *.safetensors, tokenizer.json)", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); errors.Is(err, os.ErrNotExist) {
		if _, err := gguf.Find(dir); err == nil {
			return nil // a folder holding a GGUF model
		}
	}
	for _, need := range []struct{ file, why string }{
		{"config.json", "not a Hugging Face model folder"},
		{"tokenizer.json", "troupe reads the Hugging Face fast tokenizer file"},
	} {
		f, err := os.Open(filepath.Join(dir, need.file))
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("the model folder %s has no %s (%s)", dir, need.file, need.why)
		}
		if err != nil {
			return fmt.Errorf("cannot read the model folder: %w", err)
		}
		f.Close()
	}
	return nil
}

// parseBytes reads "1GiB", "512MiB", "1048576".
func parseBytes(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("%q is not a positive size", s)
	}
	return int64(v * float64(mult)), nil
}

// loadBar draws the weight read as a bar on w when w is a terminal (nil
// otherwise: the runtime then logs a line every few seconds of a slow
// read). The bar appears only once a read has taken a moment, so a fast
// disk draws nothing.
func loadBar(w io.Writer) func(done, total int64) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil
	}
	began := time.Now()
	drawn := false
	return func(done, total int64) {
		if total <= 0 || !drawn && (done >= total || time.Since(began) < 500*time.Millisecond) {
			return
		}
		drawn = true
		const width = 30
		n := int(width * done / total)
		fmt.Fprintf(f, "\rloading weights [%s%s] %3d%% %s / %s", strings.Repeat("=", n), strings.Repeat(" ", width-n),
			100*done/total, kvcache.FormatBytes(done), kvcache.FormatBytes(total))
		if done >= total {
			fmt.Fprintln(f)
		}
	}
}
