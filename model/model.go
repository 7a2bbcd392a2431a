package model

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"

	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/internal/hugemem"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model/safetensors"
	"github.com/troupe-ai/troupe/quant"
)

// CacheKind is the kind of per-sequence state one layer keeps between steps.
type CacheKind int

const (
	// FullAttention keeps K and V of every position: it can be cut back to
	// any earlier position, so any shared prefix is reusable.
	FullAttention CacheKind = iota + 1
	// WindowedAttention keeps K and V of every position in the paged cache and
	// applies the sliding window as a mask. Because nothing is overwritten it can
	// be cut back like FullAttention; it is not a ring buffer.
	WindowedAttention
	// RecurrentState is the convolution and SSM state of a state-space
	// (Mamba) layer: a fixed-size summary of every position so far, which
	// cannot be cut back to an earlier position.
	RecurrentState
)

func (k CacheKind) String() string {
	switch k {
	case FullAttention:
		return "full_attention"
	case WindowedAttention:
		return "windowed_attention"
	case RecurrentState:
		return "recurrent_state"
	}
	return fmt.Sprintf("CacheKind(%d)", int(k))
}

// Rewindable reports whether state of this kind can be cut back to an
// arbitrary earlier position (so prefix reuse needs no snapshots).
func (k CacheKind) Rewindable() bool { return k == FullAttention || k == WindowedAttention }

// LayerCache declares what one layer keeps per sequence.
type LayerCache struct {
	Kind    CacheKind
	KVHeads int
	HeadDim int
	Window  int // sliding window (WindowedAttention), 0 otherwise
	// RecurrentState: floats of convolution state (the last kernel-1 inputs
	// of every conv channel) and of SSM state per sequence.
	ConvState, SSMState int
}

// StateSize is the number of floats of recurrent state per sequence.
func (l LayerCache) StateSize() int { return l.ConvState + l.SSMState }

// KVDim is the number of floats of K (and of V) the layer stores per position.
func (l LayerCache) KVDim() int {
	if l.Kind == FullAttention || l.Kind == WindowedAttention {
		return l.KVHeads * l.HeadDim
	}
	return 0
}

// SnapshotReuse reports whether reusing a prompt prefix needs whole-state
// snapshots: true as soon as one layer's state cannot be cut back.
func SnapshotReuse(layers []LayerCache) bool {
	for _, l := range layers {
		if !l.Kind.Rewindable() {
			return true
		}
	}
	return false
}

// PoolLayout is the kvcache layout of these layers: KV widths of attention
// layers and state sizes of recurrent ones.
func PoolLayout(layers []LayerCache) kvcache.Layout {
	l := kvcache.Layout{KVDims: make([]int, len(layers)), StateSizes: make([]int, len(layers))}
	for i, c := range layers {
		l.KVDims[i] = c.KVDim()
		l.StateSizes[i] = c.StateSize()
	}
	return l
}

// Info describes a loaded model.
type Info struct {
	Arch        string // config.json architectures[0]
	ModelType   string // config.json model_type
	Vocab       int
	Hidden      int
	Layers      int
	MaxPos      int // max_position_embeddings
	DType       gpu.DType
	BOS         int   // -1 when unknown
	EOS         []int // from generation_config.json, else config.json
	Params      int64 // parameter count (a tied embedding counted once)
	WeightBytes int64
	// DTypeParams splits Params by the dtype the weights are held in
	// (after LoadOptions.Quantize): what a device that converts weights
	// at upload (gpu/cuda) sizes its weight memory from.
	DTypeParams map[gpu.DType]int64
	// HugePages: the weight matrices were copied into memory advised for
	// transparent huge pages (see LoadOptions.Mmap); false when they are
	// read from the memory-mapped files.
	HugePages bool
}

// LogitsMode says which positions of a chunk need logits.
type LogitsMode uint8

const (
	// NoLogits computes none (a prefill chunk that is not the last).
	NoLogits LogitsMode = iota
	// LastLogits computes the logits of the chunk's last position.
	LastLogits
	// AllLogits computes logits at every position of the chunk.
	AllLogits
)

// Seq is one sequence's part of a batched forward step: a chunk of tokens
// that continues the sequence's state at position Pos.
type Seq struct {
	Tokens []int32
	Pos    int     // position of Tokens[0]: the state covers positions [0, Pos)
	Pages  []int32 // KV page table covering at least Pos+len(Tokens) positions
	Slot   int32   // recurrent state slot (models with recurrent layers)
	Logits LogitsMode
}

// Model is a loaded architecture. Forward is not safe for concurrent use: one
// owner (the scheduler) drives it, as one stream drives a device.
type Model interface {
	Info() Info
	// Cache declares every layer's per-sequence state.
	Cache() []LayerCache
	// Forward runs one step over several sequences — prefill chunks and
	// single-token decodes mixed — writing their KV and recurrent state into
	// the pool and returning the requested logits, rows in sequence order (a
	// LastLogits sequence gives one row, AllLogits len(Tokens) rows), each row
	// Vocab wide. The returned slice is reused by the next call.
	Forward(dev gpu.Device, pool *kvcache.Pool, seqs []Seq) ([]float32, error)
	// Snapshot copies the state of seq, which covers exactly tokens, out of
	// the pool (Snapshot.Restore puts it back).
	Snapshot(pool *kvcache.Pool, seq *kvcache.Seq, tokens []int32) (*Snapshot, error)
	// Close releases the weights (unmaps files).
	Close() error
}

// Family is one architecture family: how to build it from a config and weights.
type Family struct {
	Name       string
	ModelTypes []string // config.json model_type values it serves
	Load       func(c *Config, w *Weights) (Model, error)
}

// Registry maps model types to families.
type Registry struct {
	families map[string]Family
}

// NewRegistry returns a registry holding every family troupe implements.
func NewRegistry() *Registry {
	r := &Registry{families: map[string]Family{}}
	for _, f := range []Family{llamaFamily, qwen2Family, qwen3Family, mistralFamily, phi3Family, gemma2Family, gemma3Family, mambaFamily, mamba2Family, jambaFamily, bambaFamily} {
		r.Register(f)
	}
	return r
}

// Register adds a family (replacing any with the same model types).
func (r *Registry) Register(f Family) {
	for _, t := range f.ModelTypes {
		r.families[t] = f
	}
}

// ModelTypes lists the model_type values the registry can load.
func (r *Registry) ModelTypes() []string {
	out := make([]string, 0, len(r.families))
	for t := range r.families {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Family returns the family serving modelType.
func (r *Registry) Family(modelType string) (Family, bool) {
	f, ok := r.families[modelType]
	return f, ok
}

// Load opens the checkpoint at path (a Hugging Face folder with
// config.json, generation_config.json, model.safetensors or a sharded
// index; or a GGUF file, see Registry.LoadWith) with the default registry.
func Load(path string) (Model, error) { return NewRegistry().Load(path) }

// LoadContext opens the checkpoint at path with every family registered,
// reading the weights from disk first (see Registry.LoadContext).
func LoadContext(ctx context.Context, path string, progress func(done, total int64)) (Model, error) {
	return NewRegistry().LoadContext(ctx, path, progress)
}

// LoadWith opens the checkpoint at path (a Hugging Face folder or a GGUF
// file) with every family registered (see Registry.LoadWith).
func LoadWith(ctx context.Context, path string, opts LoadOptions) (Model, error) {
	return NewRegistry().LoadWith(ctx, path, opts)
}

// LoadOptions are the choices of Registry.LoadWith.
type LoadOptions struct {
	// Prefault reads every page of the checkpoint files before building the
	// model (safetensors.Model.Prefault), reporting Progress in bytes, so a
	// slow disk is paid for at load time rather than by the first request.
	Prefault bool
	Progress func(done, total int64)
	// Dequantize turns a GGUF file's quantized matrices into float32 at
	// load (4 bytes per parameter), as a backend without quantized kernels
	// needs. By default they keep their stored type (gpu's quantized
	// dtypes), and the matmuls read them as they are.
	Dequantize bool
	// Quantize, when set (gpu.Q8_0, gpu.Q4_K, ...), quantizes the F32,
	// BF16 and F16 weight matrices whose rows are whole blocks of that type
	// at load, as llama-quantize would (package quant): `serve --quantize`.
	// Vectors, and matrices already quantized, are kept as they are.
	Quantize gpu.DType
	// Mmap keeps the weight matrices in the memory-mapped checkpoint files.
	// By default they are copied, one tensor at a time, into anonymous
	// memory advised for 2 MiB transparent huge pages (internal/hugemem),
	// each tensor's mapped pages are dropped from the resident set once
	// copied, and the files are unmapped once the model is built: decode streams
	// every weight once per token, and from huge pages it runs much faster
	// (fewer TLB misses and page walks). Mmap saves the copy (the weights
	// stay shared with the page cache) at the cost of that speed.
	Mmap bool
}

// Load opens the checkpoint at path, with the weights copied into
// huge-page memory as they are built (LoadOptions{}).
func (r *Registry) Load(path string) (Model, error) {
	return r.LoadWith(context.Background(), path, LoadOptions{})
}

// LoadContext opens the checkpoint at path and reads its weights from disk
// once first (LoadOptions.Prefault), reporting progress in bytes, so a slow
// disk is paid for at load time rather than by the first request. It stops
// when ctx is done.
func (r *Registry) LoadContext(ctx context.Context, path string, progress func(done, total int64)) (Model, error) {
	return r.LoadWith(ctx, path, LoadOptions{Prefault: true, Progress: progress})
}

// LoadWith opens the checkpoint at path as opts say. path is a Hugging
// Face folder (config.json, generation_config.json, model.safetensors or a
// sharded index), a GGUF file, or a folder without config.json holding
// exactly one GGUF file (GGUFFile). A GGUF file's hyperparameters come from
// its metadata (general.architecture llama, qwen2, qwen3, phi3, gemma2 or
// gemma3) and its tensors are read under their Hugging Face names: F32,
// F16 and BF16 weights keep their dtype, and so do quantized matrices
// (gpu's Q8_0 ... Q6_K), unless opts.Dequantize turns them into F32 (4
// bytes per parameter); quantized vectors are dequantized. BOS and EOS come from
// the tokenizer.ggml.* ids; a GGUF model has no generation_config.json.
func (r *Registry) LoadWith(ctx context.Context, path string, opts LoadOptions) (Model, error) {
	file, err := GGUFFile(path)
	if err != nil {
		return nil, err
	}
	var (
		cfg *Config
		src tensorSource
	)
	if file != "" {
		c, s, err := openGGUF(file, opts.Dequantize)
		if errors.Is(err, gguf.ErrBadMagic) {
			return nil, fmt.Errorf("%s is not a model: give a Hugging Face model folder (config.json, *.safetensors) or a GGUF file: %w", file, err)
		}
		if err != nil {
			return nil, err
		}
		cfg, src, path = c, s, file
	} else {
		if cfg, err = ReadConfig(path); err != nil {
			return nil, err
		}
	}
	closeSrc := func() {
		if src != nil {
			src.Close()
		}
	}
	mt, err := cfg.String("model_type", "")
	if err != nil {
		closeSrc()
		return nil, err
	}
	fam, ok := r.families[mt]
	if !ok {
		closeSrc()
		arch := ""
		if a, ok := cfg.Raw("architectures").([]any); ok && len(a) > 0 {
			arch, _ = a[0].(string)
		}
		return nil, fmt.Errorf("%s: unknown architecture %q (model_type %q); supported model types: %s", cfg.Path, arch, mt, strings.Join(r.ModelTypes(), ", "))
	}
	if src == nil {
		st, err := safetensors.Open(path)
		if err != nil {
			return nil, err
		}
		src = stSource{st}
	}
	if opts.Prefault {
		if err := src.Prefault(ctx, opts.Progress); err != nil {
			src.Close()
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	w := &Weights{Dir: path, st: src, gguf: file != "", quantize: opts.Quantize}
	if !opts.Mmap {
		// Room for every tensor of the files, each rounded up to the
		// arena's alignment; only the pages written are committed.
		if w.arena, err = hugemem.New(src.Bytes() + int64(src.Count())*64 + hugemem.PageSize); err != nil {
			src.Close()
			return nil, fmt.Errorf("%s: weight memory: %w", path, err)
		}
	}
	m, err := fam.Load(cfg, w)
	if err != nil {
		w.Close()
		return nil, err
	}
	if w.arena != nil {
		// Every matrix now lives in the arena: seal it and unmap the files.
		if err := w.arena.Seal(); err != nil {
			m.Close()
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := src.Close(); err != nil {
			m.Close()
			return nil, err
		}
	}
	return m, nil
}

// readInfo finishes loading: it reports the first weight error, then fills
// Info from the config and generation_config.json.
func readInfo(c *Config, w *Weights, arch string, vocab, hidden, layers, maxPos int, embed *gpu.Weight) (Info, error) {
	if err := w.Err(); err != nil {
		return Info{}, err
	}
	gen := &GenerationConfig{}
	var err error
	if !w.gguf {
		if gen, err = ReadGenerationConfig(w.Dir); err != nil {
			return Info{}, err
		}
	}
	eos := gen.EOS
	if eos == nil {
		if eos, err = c.Ints("eos_token_id"); err != nil {
			return Info{}, err
		}
	}
	bos, err := c.Int("bos_token_id", -1)
	if err != nil {
		return Info{}, err
	}
	mt, _ := c.String("model_type", "")
	return Info{Arch: arch, ModelType: mt, Vocab: vocab, Hidden: hidden, Layers: layers, MaxPos: maxPos,
		DType: embed.DType, BOS: bos, EOS: eos, Params: w.params, WeightBytes: w.bytes,
		DTypeParams: maps.Clone(w.byDType),
		HugePages:   w.arena != nil && w.arena.Huge()}, nil
}

// Weights wraps the checkpoint's tensors with shape-checked accessors.
type Weights struct {
	// Dir is the checkpoint: its folder, or the GGUF file.
	Dir    string
	st     tensorSource
	gguf   bool           // st is a GGUF file: no generation_config.json
	arena  *hugemem.Arena // where matrices are copied; nil: they stay mapped
	err    error
	params int64
	bytes  int64
	// byDType is params by the dtype the tensors are held in.
	byDType map[gpu.DType]int64
	// quantize is LoadOptions.Quantize; made holds the first byte of the
	// data Weights quantized itself (heap memory the source must not drop).
	quantize gpu.DType
	made     map[*byte]bool
}

// Matrix returns the 2-D tensor name, which must be rows x cols, in the
// weight memory (see LoadOptions.Mmap).
func (w *Weights) Matrix(name string, rows, cols int) *gpu.Weight {
	return w.own(w.mapped(name, rows, cols))
}

// mapped is Matrix without the copy: the data is in the mapped file, so the
// weight must be copied (own, concatRows) before loading ends.
func (w *Weights) mapped(name string, rows, cols int) *gpu.Weight {
	t := w.tensor(name, rows, cols)
	if t == nil {
		return nil
	}
	m := &gpu.Weight{DType: t.DType, Rows: rows, Cols: cols, Data: t.Data}
	if q := w.quantize; q.Quantized() && !m.DType.Quantized() && cols%q.BlockSize() == 0 {
		g, _ := q.GGML()
		data, err := quant.Quantize(g, m.Float32s())
		if err != nil {
			w.err = fmt.Errorf("%s: quantizing %s to %v: %w", w.Dir, name, q, err)
			return nil
		}
		w.st.DropPages(m.Data)
		w.bytes += int64(len(data)) - int64(len(m.Data))
		w.byDType[m.DType] -= int64(rows) * int64(cols)
		w.byDType[q] += int64(rows) * int64(cols)
		if w.made == nil {
			w.made = map[*byte]bool{}
		}
		w.made[&data[0]] = true
		m = &gpu.Weight{DType: q, Rows: rows, Cols: cols, Data: data}
	}
	return m
}

// drop says that data, handed out by mapped, has been copied: the source
// may drop its pages (not data Weights quantized itself).
func (w *Weights) drop(data []byte) {
	if len(data) > 0 && !w.made[&data[0]] {
		w.st.DropPages(data)
	}
}

// own returns m with its data in the arena (m itself without an arena).
func (w *Weights) own(m *gpu.Weight) *gpu.Weight {
	if m == nil || w.arena == nil {
		return m
	}
	data := w.alloc(len(m.Data))
	if data == nil {
		return nil
	}
	copy(data, m.Data)
	w.drop(m.Data)
	return &gpu.Weight{DType: m.DType, Rows: m.Rows, Cols: m.Cols, Data: data}
}

// alloc returns n bytes of weight memory: from the arena, else the heap;
// nil after recording an error.
func (w *Weights) alloc(n int) []byte {
	if w.arena == nil {
		return make([]byte, n)
	}
	b, err := w.arena.Alloc(n)
	if err != nil {
		if w.err == nil {
			w.err = fmt.Errorf("%s: %w", w.Dir, err)
		}
		return nil
	}
	return b
}

// Vector returns the 1-D tensor name of n elements widened to float32.
func (w *Weights) Vector(name string, n int) []float32 {
	t := w.tensor(name, n)
	if t == nil {
		return nil
	}
	return (&gpu.Weight{DType: t.DType, Rows: 1, Cols: n, Data: t.Data}).Float32s()
}

// OptVector is Vector for a tensor that may be absent (nil then).
func (w *Weights) OptVector(name string, n int) []float32 {
	if !w.st.Has(name) {
		return nil
	}
	return w.Vector(name, n)
}

// OptMatrix is Matrix for a tensor that may be absent (nil then).
func (w *Weights) OptMatrix(name string, rows, cols int) *gpu.Weight {
	if !w.st.Has(name) {
		return nil
	}
	return w.Matrix(name, rows, cols)
}

// Has reports whether the checkpoint holds tensor name.
func (w *Weights) Has(name string) bool { return w.st.Has(name) }

func (w *Weights) tensor(name string, shape ...int) *srcTensor {
	if w.err != nil {
		return nil
	}
	t, err := w.st.Tensor(name)
	if err != nil {
		w.err = err
		return nil
	}
	if !equalShape(t.Shape, shape) {
		what := fmt.Sprintf("%q", name)
		if t.Stored != "" {
			what += fmt.Sprintf(" (%s in the file, whose ne lists the dimensions in reverse)", t.Stored)
		}
		w.err = fmt.Errorf("%s: tensor %s has shape %v, the config implies %v", filepath.Base(t.File), what, t.Shape, shape)
		return nil
	}
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	w.params += n
	w.bytes += int64(len(t.Data))
	if w.byDType == nil {
		w.byDType = map[gpu.DType]int64{}
	}
	w.byDType[t.DType] += n
	return t
}

// Err is the first error met by the accessors.
func (w *Weights) Err() error { return w.err }

// Close unmaps the checkpoint files and frees the weight memory; weights
// obtained earlier must not be used afterwards.
func (w *Weights) Close() error {
	err := w.st.Close()
	if w.arena != nil {
		if e := w.arena.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
