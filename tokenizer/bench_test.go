package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/troupe-ai/troupe/internal/fixtures"
)

// benchCorpus builds about 1 MB of English prose and source code: the
// fixture corpus' prose and code records plus generated paragraphs, so the
// benchmark needs nothing beyond the fixtures.
func benchCorpus(tb testing.TB) string {
	tb.Helper()
	prose := []string{
		"The quick brown fox jumps over the lazy dog while the farmer's daughter, who'd been watching since dawn, wonders aloud whether it's worth the trouble. ",
		"In 1987, researchers at the institute published a 42-page report on the migration patterns of Arctic terns; their findings surprised everyone. ",
		"\"We can't keep doing this,\" she said, closing the laptop. \"Not if we want to ship by Friday — and we do.\"\n\n",
		"Large language models predict the next token given the previous ones. Serving them efficiently means batching requests, reusing cached prefixes and streaming output. ",
	}
	code := []string{
		"func (s *Server) handle(w http.ResponseWriter, r *http.Request) {\n\tif r.Method != http.MethodPost {\n\t\thttp.Error(w, \"method not allowed\", 405)\n\t\treturn\n\t}\n\tdefer r.Body.Close()\n}\n\n",
		"def fibonacci(n: int) -> list[int]:\n    a, b = 0, 1\n    out = []\n    for _ in range(n):\n        out.append(a)\n        a, b = b, a + b\n    return out\n\n",
		"const config = { retries: 3, timeoutMs: 2500, endpoints: ['https://api.example.com/v1', 'https://backup.example.com'] };\n",
		"SELECT u.id, u.name, COUNT(o.id) AS orders FROM users u LEFT JOIN orders o ON o.user_id = u.id GROUP BY u.id HAVING COUNT(o.id) > 5;\n",
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString(prose[i%len(prose)])
		if i%3 == 0 {
			sb.WriteString(code[(i/3)%len(code)])
		}
		// Vary the words so the BPE cache does not see only repeats.
		fmt.Fprintf(&sb, "Item %d of batch %x: %s. ", i, i*7919, strings.Repeat("na", i%7))
	}
	return sb.String()
}

func BenchmarkEncode(b *testing.B) {
	text := benchCorpus(b)
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			tk := loadFamily(b, fam, false)
			ids := tk.AppendIDs(nil, text, true)
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for b.Loop() {
				ids = tk.AppendIDs(ids[:0], text, true)
			}
			b.ReportMetric(float64(len(ids)), "tokens")
		})
	}
}

// BenchmarkEncodeChatPrompt encodes a chat-formatted prompt of about 4096
// tokens (the serving fast path).
func BenchmarkEncodeChatPrompt(b *testing.B) {
	text := benchCorpus(b)
	for _, fam := range []string{"qwen3", "llama3_1"} {
		b.Run(fam, func(b *testing.B) {
			tk := loadFamily(b, fam, false)
			// A chat prompt of about 4096 tokens.
			n := 0
			for ids := 0; ids < 4096; n += 512 {
				ids = len(tk.EncodeIDs(text[:n+512], true))
			}
			prompt := "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + text[:n] + "<|im_end|>\n<|im_start|>assistant\n"
			ids := tk.EncodeIDs(prompt, true)
			b.ResetTimer()
			for b.Loop() {
				ids = tk.AppendIDs(ids[:0], prompt, true)
			}
			b.ReportMetric(float64(len(ids)), "tokens")
		})
	}
}

func BenchmarkLoad(b *testing.B) {
	for _, fam := range families {
		b.Run(fam, func(b *testing.B) {
			dir := fixtures.Path(b, "tokenizers", fam)
			st, err := os.Stat(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(st.Size())
			for b.Loop() {
				if _, err := Load(dir, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
