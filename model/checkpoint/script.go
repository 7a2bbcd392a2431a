package checkpoint

import (
	"fmt"
	"math"
	"strings"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model/safetensors"
)

// A script model keeps every layer's output projections at zero, so the
// residual stream at each position is just the current token's embedding;
// the final norm scales it to RMS 1 and the LM head row of each token's
// successor is that normalized embedding, so the successor's logit is the
// hidden size H while any other token's is H times a cosine of two random
// vectors (about ±3/√H at most): a margin no sampling setting overturns.

// scriptChain maps each script token to its successor.
func scriptChain(c Config, script []int32) (map[int32]int32, error) {
	switch mt, _ := c["model_type"].(string); mt {
	case "llama", "qwen2", "qwen3", "mistral", "phi3":
	default:
		return nil, fmt.Errorf("a script model needs a llama, qwen2, qwen3, mistral or phi3 config, not %q", mt)
	}
	V := int32(c.int("vocab_size", 0))
	next := map[int32]int32{}
	for i, id := range script {
		if id < 0 || id >= V {
			return nil, fmt.Errorf("script token %d is outside the vocabulary of %d", id, V)
		}
		if i+1 == len(script) {
			break
		}
		if n, ok := next[id]; ok && n != script[i+1] {
			return nil, fmt.Errorf("script token %d (position %d) repeats with another successor (%d, then %d): a script model's next token depends only on the current one", id, i, n, script[i+1])
		}
		next[id] = script[i+1]
	}
	return next, nil
}

// silenceLayers zeroes what each layer adds to the residual stream and
// the LM head (filled by scriptHead).
func silenceLayers(specs []tensorSpec) {
	for i, s := range specs {
		if strings.Contains(s.name, "o_proj.") || strings.Contains(s.name, "down_proj.") || s.name == "lm_head.weight" {
			specs[i].fill = 0
		}
	}
}

// scriptHead writes the LM head rows: each successor's row is the sum of
// its predecessors' normalized embeddings.
func scriptHead(ts []safetensors.WriteTensor, next map[int32]int32, dt gpu.DType) {
	var embed, head *safetensors.WriteTensor
	for i := range ts {
		switch ts[i].Name {
		case "model.embed_tokens.weight":
			embed = &ts[i]
		case "lm_head.weight":
			head = &ts[i]
		}
	}
	V, H := embed.Shape[0], embed.Shape[1]
	e := &gpu.Weight{DType: dt, Rows: V, Cols: H, Data: embed.Data}
	w := &gpu.Weight{DType: dt, Rows: V, Cols: H, Data: head.Data}
	for cur, succ := range next {
		var ss float64
		for j := 0; j < H; j++ {
			v := float64(e.At(int(cur), j))
			ss += v * v
		}
		scale := float32(1 / math.Sqrt(ss/float64(H)+1e-12))
		for j := 0; j < H; j++ {
			setElem(head.Data, dt, int(succ)*H+j, w.At(int(succ), j)+e.At(int(cur), j)*scale)
		}
	}
}
