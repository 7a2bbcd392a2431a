package http_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/internal/fixtures"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

// qwen3Model writes a tiny checkpoint of arch with Qwen3's real tokenizer and
// chat template (a thinking template that re-renders earlier assistant
// turns without their think blocks).
func qwen3Model(t *testing.T, arch string) (string, *tokenizer.Tokenizer) {
	t.Helper()
	tokDir := fixtures.Path(t, "tokenizers", "qwen3")
	dir := filepath.Join(t.TempDir(), arch)
	cfg, err := checkpoint.Tiny(arch)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.AdoptTokenizer(cfg, tokDir, dir); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.Write(dir, cfg, checkpoint.Options{Seed: 2, Std: 0.3}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return dir, tok
}

// TestMultiTurnReuse: from turn 2 on, only the new user message and the
// turn boundary are computed — on a dense model (prefix pages) and on a
// snapshot model (Mamba) alike, with Qwen3's thinking template, thanks to
// the warm-up of the history as the next turn renders it.
func TestMultiTurnReuse(t *testing.T) {
	for _, arch := range []string{"llama", "mamba"} {
		t.Run(arch, func(t *testing.T) {
			dir, tok := qwen3Model(t, arch)
			s := start(t, troupe.Options{Model: dir, PromptCache: true}, troupehttp.Config{})
			s.waitReady(t)
			msgs := []map[string]string{{"role": "system", "content": "You are a helpful assistant that answers briefly."}}
			for turn := 0; turn < 4; turn++ {
				user := fmt.Sprintf("Question number %d: what comes next in the sequence?", turn)
				msgs = append(msgs, map[string]string{"role": "user", "content": user})
				body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 12, "temperature": 0, "ignore_eos": true})
				resp, out := s.post(t, "/v1/chat/completions", string(body))
				if resp.StatusCode != 200 {
					t.Fatalf("turn %d: %d %s", turn, resp.StatusCode, out)
				}
				var r struct {
					Choices []struct{ Message struct{ Content string } }
					Usage   struct {
						Prompt  int `json:"prompt_tokens"`
						Details struct {
							Cached int `json:"cached_tokens"`
						} `json:"prompt_tokens_details"`
					}
				}
				if err := json.Unmarshal(out, &r); err != nil {
					t.Fatal(err)
				}
				if turn > 0 {
					// What only this turn adds: the user message and the
					// boundary tokens around it, plus the generation prompt.
					fresh := len(tok.EncodeIDs("<|im_end|>\n<|im_start|>user\n"+user+"<|im_end|>\n<|im_start|>assistant\n", false))
					if uncached := r.Usage.Prompt - r.Usage.Details.Cached; uncached > fresh+8 {
						t.Errorf("turn %d: %d of %d prompt tokens computed, want at most %d (new message %d + 8)",
							turn, uncached, r.Usage.Prompt, fresh+8, fresh)
					}
				}
				msgs = append(msgs, map[string]string{"role": "assistant", "content": r.Choices[0].Message.Content})
				waitWarmUps(t, s, turn+1)
			}
		})
	}
}

// waitWarmUps waits until the server has run n warm-ups (they run when the
// scheduler is idle, after the response).
func waitWarmUps(t *testing.T, s *server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, stats := s.get(t, "/v1/cache/stats")
		if strings.Contains(stats, fmt.Sprintf(`"warm_ups":%d`, n)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("warm-up %d did not run: %s", n, stats)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
