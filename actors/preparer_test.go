package actors

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/metrics"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// chatML is the demo's template; with the byte tokenizer a token is a byte
// (or <|im_start|>, <|im_end|>), so the history boundary is easy to count.
const chatML = "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

func testAssets(t *testing.T) *chat.Assets {
	t.Helper()
	dir := t.TempDir()
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := templates.Compile(chatML)
	if err != nil {
		t.Fatal(err)
	}
	return &chat.Assets{Tokenizer: tok, Template: tmpl}
}

// conversationRequest has an earlier assistant turn, so a history boundary
// exists: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n".
func conversationRequest(t *testing.T) *chat.Request {
	t.Helper()
	v, err := templates.DecodeJSON([]byte(`[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"user","content":"More?"}]`))
	if err != nil {
		t.Fatal(err)
	}
	return &chat.Request{Messages: v.([]any), MaxTokens: 2}
}

// historyTokens is the boundary of conversationRequest in tokens.
const historyTokens = 1 + len("user\nHi") + 2 + 1 + len("assistant\nHello.") + 2

// spawnPreparer starts a preparer with the boundary switch b, registered
// with a stand-in ModelActor that hands it the assets and capability c
// (CapabilityUnknownYet: the model is still loading).
func spawnPreparer(t *testing.T, c Capability, b BoundarySnapshots) (*actor.ActorSystem, *actor.PID, *metrics.Metrics) {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	assets := testAssets(t)
	var ready *CapabilityReady
	if c != CapabilityUnknownYet {
		ready = &CapabilityReady{SnapshotReuse: c == SnapshotReuse}
	}
	model := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*registerPreparer); ok {
			ctx.Respond(&registration{assets: assets, capability: ready})
		}
	}))
	m := metrics.New()
	pid := system.Root.Spawn(actor.PropsFromProducer(NewRequestPreparer(model, m, slog.Default(), nil, b)))
	return system, pid, m
}

func prepare(t *testing.T, system *actor.ActorSystem, pid *actor.PID, msg *Prepare) *Prepared {
	t.Helper()
	res, err := system.Root.RequestFuture(pid, msg, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	out, ok := res.(*Prepared)
	if !ok {
		t.Fatalf("preparer answered %T", res)
	}
	return out
}

// TestPreparerBoundarySnapshots: the kill switch on the preparer's gate.
// auto is the gate (fail-open while unknown, rendered on snapshot reuse,
// skipped on dense KV); off renders no boundary for any capability, counts
// the ones auto would have rendered as disabled, and leaves dense KV as it
// was.
func TestPreparerBoundarySnapshots(t *testing.T) {
	outcomes := []string{metrics.Rendered, metrics.FailOpen, metrics.SkippedDense, metrics.Disabled}
	for _, tc := range []struct {
		name       string
		capability Capability
		boundary   BoundarySnapshots
		rendered   bool
		outcome    string
	}{
		{"unknown/auto", CapabilityUnknownYet, BoundarySnapshotsAuto, true, metrics.FailOpen},
		{"unknown/zero value is auto", CapabilityUnknownYet, "", true, metrics.FailOpen},
		{"unknown/off", CapabilityUnknownYet, BoundarySnapshotsOff, false, metrics.Disabled},
		{"snapshot/auto", SnapshotReuse, BoundarySnapshotsAuto, true, metrics.Rendered},
		{"snapshot/off", SnapshotReuse, BoundarySnapshotsOff, false, metrics.Disabled},
		{"dense/auto", DenseKV, BoundarySnapshotsAuto, false, metrics.SkippedDense},
		{"dense/off", DenseKV, BoundarySnapshotsOff, false, metrics.SkippedDense},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system, pid, m := spawnPreparer(t, tc.capability, tc.boundary)
			for _, inspect := range []bool{false, true} {
				out := prepare(t, system, pid, &Prepare{ID: "r", Request: conversationRequest(t), PromptCache: true, InspectOnly: inspect})
				if out.Err != nil {
					t.Fatal(out.Err)
				}
				if out.Capability != tc.capability {
					t.Fatalf("prepared under %v, want %v", out.Capability, tc.capability)
				}
				p := out.Prepared
				if p.BoundaryRendered != tc.rendered {
					t.Fatalf("inspect %v: boundary rendered %v, want %v (%s)", inspect, p.BoundaryRendered, tc.rendered, p.BoundaryNote)
				}
				want := 0
				if tc.rendered {
					want = historyTokens
				}
				if p.Boundary != want {
					t.Fatalf("inspect %v: boundary %d tokens, want %d", inspect, p.Boundary, want)
				}
				if !inspect && out.Job.HistoryBoundary != int32(want) {
					t.Fatalf("job's history boundary %d, want %d", out.Job.HistoryBoundary, want)
				}
				if tc.boundary.Off() && p.BoundaryNote != ErrBoundarySnapshotsOff.Error() {
					t.Fatalf("note %q with boundary snapshots off", p.BoundaryNote)
				}
			}
			for _, o := range outcomes {
				want := 0.0
				if o == tc.outcome {
					want = 2
				}
				if got := testutil.ToFloat64(m.HistoryRenders.WithLabelValues(o)); got != want {
					t.Errorf("history_renders_total{outcome=%q} = %v, want %v", o, got, want)
				}
			}
		})
	}
}

// TestPreparerBoundarySnapshotsNotCounted: requests the gate never renders
// for (prompt cache off) are not counted as disabled either.
func TestPreparerBoundarySnapshotsNotCounted(t *testing.T) {
	system, pid, m := spawnPreparer(t, SnapshotReuse, BoundarySnapshotsOff)
	out := prepare(t, system, pid, &Prepare{ID: "r", Request: conversationRequest(t), PromptCache: false})
	if out.Err != nil || out.Prepared.BoundaryRendered {
		t.Fatalf("prompt cache off: %v, rendered %v", out.Err, out.Prepared.BoundaryRendered)
	}
	if got := testutil.ToFloat64(m.HistoryRenders.WithLabelValues(metrics.Disabled)); got != 0 {
		t.Fatalf("disabled = %v with the prompt cache off, want 0", got)
	}
}

// TestPreparerWarmUpBoundarySnapshots: a warm-up prefills the next turn's
// history, which on a model that may reuse by snapshots ends in a snapshot:
// off refuses it (no render) unless the model is known to be dense-KV.
func TestPreparerWarmUpBoundarySnapshots(t *testing.T) {
	for _, tc := range []struct {
		name       string
		capability Capability
		boundary   BoundarySnapshots
		refused    bool
	}{
		{"unknown/auto", CapabilityUnknownYet, BoundarySnapshotsAuto, false},
		{"unknown/off", CapabilityUnknownYet, BoundarySnapshotsOff, true},
		{"snapshot/auto", SnapshotReuse, BoundarySnapshotsAuto, false},
		{"snapshot/off", SnapshotReuse, BoundarySnapshotsOff, true},
		{"dense/auto", DenseKV, BoundarySnapshotsAuto, false},
		{"dense/off", DenseKV, BoundarySnapshotsOff, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			system, pid, _ := spawnPreparer(t, tc.capability, tc.boundary)
			reply := chat.Reply{Content: "Fine."}
			out := prepare(t, system, pid, &Prepare{ID: "w", Request: conversationRequest(t), PromptCache: true, WarmUpReply: &reply})
			if tc.refused {
				if !errors.Is(out.Err, ErrBoundarySnapshotsOff) || out.Job != nil {
					t.Fatalf("warm-up with boundary snapshots off: err %v, job %v", out.Err, out.Job)
				}
				return
			}
			if out.Err != nil || out.Job == nil || !out.Job.WarmUp || len(out.Job.Prompt) == 0 {
				t.Fatalf("warm-up: err %v, job %v", out.Err, out.Job)
			}
		})
	}
}

func TestParseBoundarySnapshots(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want BoundarySnapshots
		ok   bool
	}{
		{"", BoundarySnapshotsAuto, true},
		{"auto", BoundarySnapshotsAuto, true},
		{"off", BoundarySnapshotsOff, true},
		{"OFF", "", false},
		{"on", "", false},
		{"false", "", false},
	} {
		got, err := ParseBoundarySnapshots(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBoundarySnapshots(%q) = %q, %v", tc.in, got, err)
		}
		var v BoundarySnapshots
		if err := v.Set(tc.in); (err == nil) != tc.ok || v != tc.want {
			t.Errorf("Set(%q): %q, %v", tc.in, v, err)
		}
	}
	if s := BoundarySnapshots("").String(); s != "auto" {
		t.Errorf("the zero value reads %q, want auto", s)
	}
	for _, tc := range []struct {
		b      BoundarySnapshots
		c      Capability
		blocks bool
	}{
		{BoundarySnapshotsAuto, CapabilityUnknownYet, false},
		{BoundarySnapshotsAuto, SnapshotReuse, false},
		{"", SnapshotReuse, false},
		{BoundarySnapshotsOff, CapabilityUnknownYet, true},
		{BoundarySnapshotsOff, SnapshotReuse, true},
		{BoundarySnapshotsOff, DenseKV, false},
	} {
		if got := tc.b.Blocks(tc.c); got != tc.blocks {
			t.Errorf("%v.Blocks(%v) = %v, want %v", tc.b, tc.c, got, tc.blocks)
		}
	}
}
