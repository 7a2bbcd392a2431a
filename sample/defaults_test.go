package sample

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

// qwen is a typical model's recommendation (Qwen2.5's generation_config.json
// shape).
var qwen = Defaults{Temperature: ptr(0.6), TopP: ptr(0.9), TopK: ptr(20), RepetitionPenalty: ptr(1.1)}

// TestDefaultsApply: a model's defaults fill exactly the parameters a
// request left unset; whatever the request set wins, temperature 0 and the
// "off" values included; parameters the model does not recommend keep the
// request's (or the server's) value.
func TestDefaultsApply(t *testing.T) {
	server := Params{Temperature: 1, PresencePenalty: 0.5, Seed: 7, HasSeed: true}
	for _, tc := range []struct {
		name string
		d    Defaults
		p    Params
		set  Fields
		want Params
	}{
		{"nothing set: the model's values", qwen, server, 0,
			Params{Temperature: 0.6, TopP: 0.9, TopK: 20, RepetitionPenalty: 1.1, PresencePenalty: 0.5, Seed: 7, HasSeed: true}},
		{"explicit temperature 0 stays greedy", qwen, Params{Temperature: 0}, FieldTemperature,
			Params{Temperature: 0, TopP: 0.9, TopK: 20, RepetitionPenalty: 1.1}},
		{"explicit off values win", qwen, Params{Temperature: 1, TopP: 1, TopK: 0, RepetitionPenalty: 1},
			FieldTopP | FieldTopK | FieldRepetitionPenalty,
			Params{Temperature: 0.6, TopP: 1, TopK: 0, RepetitionPenalty: 1}},
		{"everything set: untouched", qwen, Params{Temperature: 0.2, TopP: 0.5, TopK: 3, MinP: 0.1, RepetitionPenalty: 1.3}, AllFields,
			Params{Temperature: 0.2, TopP: 0.5, TopK: 3, MinP: 0.1, RepetitionPenalty: 1.3}},
		{"no defaults: untouched", Defaults{}, server, 0, server},
		{"min_p only", Defaults{MinP: ptr(0.05)}, Params{Temperature: 1}, FieldTemperature, Params{Temperature: 1, MinP: 0.05}},
		{"top_k -1 is off", Defaults{TopK: ptr(-1)}, Params{Temperature: 1, TopK: 5}, 0, Params{Temperature: 1}},
		{"a model's temperature 0 is greedy", Defaults{Temperature: ptr(0.0)}, Params{Temperature: 1}, 0, Params{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.Apply(tc.p, tc.set); got != tc.want {
				t.Fatalf("Apply(%+v, %05b) = %+v, want %+v", tc.p, tc.set, got, tc.want)
			}
		})
	}
}

func TestDefaultsFields(t *testing.T) {
	if f := qwen.Fields(); f != FieldTemperature|FieldTopP|FieldTopK|FieldRepetitionPenalty {
		t.Errorf("qwen: %05b", f)
	}
	if f := (Defaults{}).Fields(); f != 0 {
		t.Errorf("empty: %05b", f)
	}
	all := Defaults{Temperature: ptr(1.0), TopP: ptr(1.0), TopK: ptr(0), MinP: ptr(0.0), RepetitionPenalty: ptr(1.0)}
	if f := all.Fields(); f != AllFields {
		t.Errorf("all: %05b", f)
	}
}

// TestDefaultsReport: the JSON (GET /v1/models) and the log line name the
// recommended parameters only, by the file's names and with its values.
func TestDefaultsReport(t *testing.T) {
	for _, tc := range []struct {
		d       Defaults
		json    string
		logLine string
	}{
		{qwen, `{"temperature":0.6,"top_p":0.9,"top_k":20,"repetition_penalty":1.1}`,
			"d.temperature=0.6 d.top_p=0.9 d.top_k=20 d.repetition_penalty=1.1"},
		{Defaults{Temperature: ptr(0.0), MinP: ptr(0.05)}, `{"temperature":0,"min_p":0.05}`, "d.temperature=0 d.min_p=0.05"},
		{Defaults{}, `{}`, "msg=x\n"},
	} {
		b, err := json.Marshal(tc.d)
		if err != nil || string(b) != tc.json {
			t.Errorf("json %s, %v; want %s", b, err, tc.json)
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		}})).Info("x", "d", tc.d)
		if !strings.Contains(buf.String(), tc.logLine) {
			t.Errorf("log %q, want %q in it", buf.String(), tc.logLine)
		}
	}
}
