package quant

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
)

// FileType is a file's quantization as `troupe quantize --type` names it:
// one type for every weight matrix (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0,
// q5_1, q4_k, q5_k, q6_k), or one of llama.cpp's mixtures (q4_k_m, q5_k_m),
// which give some matrices more bits.
type FileType string

// FileTypes are the file types Type knows.
var FileTypes = []FileType{"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"}

// ParseFileType reads a --type value (any case).
func ParseFileType(s string) (FileType, error) {
	ft := FileType(strings.ToLower(s))
	if !slices.Contains(FileTypes, ft) {
		names := make([]string, len(FileTypes))
		for i, t := range FileTypes {
			names[i] = string(t)
		}
		return "", fmt.Errorf("quant: unknown type %q (have %s)", s, strings.Join(names, ", "))
	}
	return ft, nil
}

// base is the type of the file's ordinary matrices.
func (ft FileType) base() gguf.GGMLType {
	switch ft {
	case "f32":
		return gguf.F32
	case "f16":
		return gguf.F16
	case "bf16":
		return gguf.BF16
	case "q8_0":
		return gguf.Q8_0
	case "q4_0":
		return gguf.Q4_0
	case "q4_1":
		return gguf.Q4_1
	case "q5_0":
		return gguf.Q5_0
	case "q5_1":
		return gguf.Q5_1
	case "q4_k", "q4_k_m":
		return gguf.Q4_K
	case "q5_k", "q5_k_m":
		return gguf.Q5_K
	}
	return gguf.Q6_K
}

// GeneralFileType is llama.cpp's LLAMA_FTYPE value for general.file_type:
// the mixture's, or for a single K type the small mixture's (q4_k: Q4_K_S,
// q5_k: Q5_K_S), the closest label llama.cpp has.
func (ft FileType) GeneralFileType() uint32 {
	return map[FileType]uint32{"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9,
		"q4_k": 14, "q4_k_m": 15, "q5_k": 16, "q5_k_m": 17, "q6_k": 18, "bf16": 32}[ft]
}

// Model is what the mixtures look at besides a tensor's name.
type Model struct {
	// Layers is the number of blocks; GQA the query heads per key/value
	// head.
	Layers, GQA int
}

// Type is the type of tensor name (GGUF's names: "blk.N.attn_v.weight",
// "output.weight", "token_embd.weight"), of rows of cols elements with dims
// dimensions, in a file of type ft. It follows llama-quantize without an
// importance matrix (llama_tensor_get_type) for these file types:
//   - one-dimensional tensors (norms, biases) stay F32;
//   - the output matrix (token_embd where the embeddings are tied, that is
//     where there is no output.weight: tied) gets Q6_K in the 4- and 5-bit
//     files;
//   - q4_k_m and q5_k_m give attn_v and ffn_down Q6_K in the first and last
//     eighth of the layers and every third layer between (use_more_bits);
//     a fused attn_qkv (phi3) counts as attn_v, as llama-quantize's
//     category_is_attn_v has it (its own attn_qkv rule is not reached);
//   - a K type whose rows are not whole super-blocks of 256 falls back to
//     the legacy type of the next size (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to
//     Q8_0), and rows that are not whole blocks of 32 stay F16.
//
// TestFileTypeMixtures checks it against every fixture file llama-quantize
// wrote.
func (ft FileType) Type(name string, cols int64, dims int, tied bool, m Model) gguf.GGMLType {
	if dims < 2 {
		return gguf.F32
	}
	t := ft.base()
	quantized := t != gguf.F32 && t != gguf.F16 && t != gguf.BF16
	output := name == "output.weight" || (tied && name == "token_embd.weight")
	switch {
	case output && quantized && t != gguf.Q8_0:
		t = gguf.Q6_K
	case ft == "q4_k_m" || ft == "q5_k_m":
		if layer, kind, ok := blockTensor(name); ok && (kind == "attn_v" || kind == "attn_qkv" || kind == "ffn_down") && useMoreBits(layer, m.Layers) {
			t = gguf.Q6_K
		}
	}
	return fallback(t, cols)
}

// fallback is the type rows of cols elements can hold.
func fallback(t gguf.GGMLType, cols int64) gguf.GGMLType {
	if cols%int64(t.BlockSize()) == 0 {
		return t
	}
	switch t {
	case gguf.Q4_K:
		t = gguf.Q5_0
	case gguf.Q5_K:
		t = gguf.Q5_1
	case gguf.Q6_K:
		t = gguf.Q8_0
	}
	if cols%int64(t.BlockSize()) == 0 {
		return t
	}
	return gguf.F16
}

// blockTensor splits "blk.N.KIND.weight".
func blockTensor(name string) (layer int, kind string, ok bool) {
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return 0, "", false
	}
	n, rest, found := strings.Cut(rest, ".")
	if !found {
		return 0, "", false
	}
	layer, err := strconv.Atoi(n)
	if err != nil {
		return 0, "", false
	}
	kind, _, _ = strings.Cut(rest, ".")
	return layer, kind, true
}

// useMoreBits is llama.cpp's choice of layers that keep more bits: the
// first and last eighth, and every third between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}
