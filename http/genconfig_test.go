package http_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/chat"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/internal/syncbuf"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
)

// recommending writes the demo model with a generation_config.json that
// recommends sampling parameters (and one min_p troupe cannot use: a
// string).
func recommending(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "gen")
	if err := checkpoint.Write(dir, checkpoint.DemoConfig(), checkpoint.Options{Seed: 1, Std: 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteByteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	gen := `{"eos_token_id": 258, "do_sample": true, "temperature": 0.6, "top_p": 0.9, "top_k": 20,
		"repetition_penalty": 1.1, "min_p": "0.05", "transformers_version": "4.51.0"}`
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(gen), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// jobServer serves dir under the generation-config mode and hands over
// every job the runtime sends the scheduler.
func jobServer(t *testing.T, dir, mode string, logw *syncbuf.Buffer) (*server, <-chan *actors.PrefillJob) {
	t.Helper()
	jobs := make(chan *actors.PrefillJob, 16)
	s := startWith(t, troupe.Options{Model: dir, ServedName: "gen", GenerationConfig: mode, Parallel: 2, KVBudget: 32 << 20,
		JobHook: func(j *actors.PrefillJob) { jobs <- j }}, troupehttp.Config{Parallel: 2}, logw)
	s.waitReady(t)
	return s, jobs
}

// sampled is what a job asks the sampler for.
type sampled struct {
	Temperature, TopP, MinP, RepetitionPenalty float32
	TopK                                       int32
}

func sampledOf(j *actors.PrefillJob) sampled {
	p := j.Sampling
	return sampled{Temperature: p.Temperature, TopP: p.TopP, MinP: p.MinP, RepetitionPenalty: p.RepetitionPenalty, TopK: p.TopK}
}

// genAPIs are the generating routes, each with a request body carrying
// extra fields (a JSON fragment, may be empty).
var genAPIs = []struct {
	name, path string
	body       func(extra string) string
}{
	{"chat", "/v1/chat/completions", func(x string) string {
		return `{"model":"gen","messages":[{"role":"user","content":"Hi"}],"max_tokens":1` + x + `}`
	}},
	{"completions", "/v1/completions", func(x string) string { return `{"model":"gen","prompt":"Hi","max_tokens":1` + x + `}` }},
	{"responses", "/v1/responses", func(x string) string { return `{"model":"gen","input":"Hi","max_output_tokens":1` + x + `}` }},
	{"anthropic", "/v1/messages", func(x string) string {
		return `{"model":"gen","messages":[{"role":"user","content":"Hi"}],"max_tokens":1` + x + `}`
	}},
}

// TestGenerationConfigDefaults: with --generation-config auto a request
// that leaves sampling parameters out gets the model's recommended ones in
// the job the engine runs, on every API; what a request sets wins
// (temperature 0 included); with none the model's file is ignored.
func TestGenerationConfigDefaults(t *testing.T) {
	dir := recommending(t)
	model := sampled{Temperature: 0.6, TopP: 0.9, TopK: 20, RepetitionPenalty: 1.1}
	builtin := sampled{Temperature: 1}
	var logs syncbuf.Buffer
	auto, autoJobs := jobServer(t, dir, "auto", &logs)
	none, noneJobs := jobServer(t, dir, "vllm", nil) // vLLM's name for none
	for _, tc := range []struct {
		name  string
		none  bool              // on the server that ignores the file
		extra map[string]string // per API (by name; "" all): the fields sent
		want  map[string]sampled
	}{
		{name: "nothing set: the model's defaults",
			want: map[string]sampled{"": model}},
		{name: "null is not set",
			extra: map[string]string{"": `,"temperature":null,"top_p":null`},
			want:  map[string]sampled{"": model}},
		{name: "explicit temperature 0 stays greedy",
			extra: map[string]string{"": `,"temperature":0`},
			want:  map[string]sampled{"": {Temperature: 0, TopP: 0.9, TopK: 20, RepetitionPenalty: 1.1}}},
		{name: "everything the API has, set",
			extra: map[string]string{
				"chat":        `,"temperature":0.3,"top_p":0.5,"top_k":5,"min_p":0.2,"repetition_penalty":1.3`,
				"completions": `,"temperature":0.3,"top_p":0.5,"top_k":-1,"min_p":0.2,"repetition_penalty":1`,
				"responses":   `,"temperature":0.3,"top_p":0.5`,
				"anthropic":   `,"temperature":0.3,"top_p":0.5,"top_k":5`,
			},
			want: map[string]sampled{
				"chat":        {Temperature: 0.3, TopP: 0.5, TopK: 5, MinP: 0.2, RepetitionPenalty: 1.3},
				"completions": {Temperature: 0.3, TopP: 0.5, TopK: 0, MinP: 0.2, RepetitionPenalty: 1},
				"responses":   {Temperature: 0.3, TopP: 0.5, TopK: 20, RepetitionPenalty: 1.1},
				"anthropic":   {Temperature: 0.3, TopP: 0.5, TopK: 5, RepetitionPenalty: 1.1},
			}},
		{name: "none: the server's defaults", none: true,
			want: map[string]sampled{"": builtin}},
		{name: "none: explicit values", none: true,
			extra: map[string]string{"": `,"temperature":0.3,"top_p":0.5`},
			want:  map[string]sampled{"": {Temperature: 0.3, TopP: 0.5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, jobs := auto, autoJobs
			if tc.none {
				s, jobs = none, noneJobs
			}
			for _, api := range genAPIs {
				extra, ok := tc.extra[api.name]
				if !ok {
					extra = tc.extra[""]
				}
				want, ok := tc.want[api.name]
				if !ok {
					want = tc.want[""]
				}
				code, body := s.do(t, "POST", api.path, api.body(extra))
				if code != 200 {
					t.Fatalf("%s: %d %v", api.name, code, body)
				}
				var job *actors.PrefillJob
				select {
				case job = <-jobs:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: no job reached the scheduler", api.name)
				}
				if got := sampledOf(job); got != want {
					t.Errorf("%s: the engine ran with %+v, want %+v", api.name, got, want)
				}
				if api.name == "responses" {
					// The response object reports what the request ran with.
					top := float64(want.TopP)
					if want.TopP == 0 {
						top = 1
					}
					if body["temperature"] != round(want.Temperature) || body["top_p"] != round32(top) {
						t.Errorf("responses: reports temperature %v top_p %v, want %v %v", body["temperature"], body["top_p"], want.Temperature, top)
					}
				}
			}
		})
	}

	// The Go API: a request that sets nothing gets the defaults; one that
	// says it set everything keeps its Sampling.
	msgs, _ := templates.DecodeJSON([]byte(`[{"role":"user","content":"Hi"}]`))
	for _, tc := range []struct {
		set  sample.Fields
		want sampled
	}{{0, model}, {sample.AllFields, sampled{Temperature: 0.2}}} {
		st, err := auto.rt.Generate(context.Background(), &chat.Request{Messages: msgs.([]any), MaxTokens: 1,
			Sampling: sample.Params{Temperature: 0.2}, SamplingSet: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		for range st.Events {
		}
		if got := sampledOf(<-autoJobs); got != tc.want || sampledOf(st.Prepared.Job) != tc.want {
			t.Errorf("Go API, set %05b: ran with %+v, want %+v", tc.set, got, tc.want)
		}
	}

	// GET /v1/models says which defaults apply; the unusable min_p is left
	// out, with a warning, and the defaults are logged once.
	for _, tc := range []struct {
		s    *server
		want string
	}{
		{auto, `{"temperature":0.6,"top_p":0.9,"top_k":20,"repetition_penalty":1.1}`},
		{none, `{}`},
	} {
		_, m := tc.s.do(t, "GET", "/v1/models", "")
		got, _ := json.Marshal(m["data"].([]any)[0].(map[string]any)["default_sampling_params"])
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(tc.want), &b)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("/v1/models default_sampling_params %s, want %s", got, tc.want)
		}
	}
	log := logs.String()
	for _, want := range []string{
		`level=WARN msg="generation_config.json: a sampling parameter is left out"`,
		`min_p must be a number in [0, 1], got the string \"0.05\"`,
		"defaults.temperature=0.6 defaults.top_p=0.9 defaults.top_k=20 defaults.repetition_penalty=1.1",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if n := strings.Count(log, `msg="sampling defaults`); n != 1 {
		t.Errorf("the sampling defaults logged %d times, want once:\n%s", n, log)
	}
}

// round is how a float32 parameter reads back from JSON.
func round(f float32) float64 { return round32(float64(f)) }

func round32(f float64) float64 {
	b, _ := json.Marshal(float32(f))
	var v float64
	json.Unmarshal(b, &v)
	return v
}

// TestGenerationConfigMode: an unknown mode is refused before anything
// starts.
func TestGenerationConfigMode(t *testing.T) {
	_, err := troupe.Start(context.Background(), troupe.Options{GenerationConfig: "path/to/dir"})
	if err == nil || !strings.Contains(err.Error(), `"path/to/dir"`) || !strings.Contains(err.Error(), `"auto"`) {
		t.Fatalf("unknown generation config mode: %v", err)
	}
}
