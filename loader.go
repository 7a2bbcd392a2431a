package troupe

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/engine"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/sample"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// dirLoader loads a model folder for the ModelActor.
type dirLoader struct{ opts Options }

// pageSize is the KV page size in positions.
const pageSize = 16

// LoadAssets reads the tokenizer and the chat template.
func (l *dirLoader) LoadAssets(ctx context.Context) (*chat.Assets, error) {
	dir := l.opts.Model
	if file, ok, err := ggufModel(dir); err != nil {
		return nil, err
	} else if ok {
		return l.loadGGUFAssets(dir, file)
	}
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		return nil, err
	}
	a := &chat.Assets{Tokenizer: tok}
	if a.Template, a.ToolTemplate, err = loadTemplates(dir, l.opts.ChatTemplate); err != nil {
		return nil, err
	}
	if a.SpecialTokens, err = templates.LoadSpecialTokens(dir); err != nil {
		return nil, err
	}
	gen, err := model.ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	eos, err := modelEOS(dir, gen)
	if err != nil {
		return nil, err
	}
	if id, ok := tok.EOS(); ok && !containsID(eos, id) {
		eos = append(eos, id)
	}
	a.EOS = eos
	a.Sampling = l.samplingDefaults(gen)
	return a, nil
}

// samplingDefaults are the model's recommended sampling parameters under
// Options.GenerationConfig, logged once: the parameters the file holds
// but troupe cannot use as warnings, the defaults that apply at info level.
func (l *dirLoader) samplingDefaults(gen *model.GenerationConfig) sample.Defaults {
	log := l.opts.Logger.With("model", l.opts.ServedName)
	if l.opts.GenerationConfig == GenerationConfigNone {
		log.Info("sampling defaults: the server's own; the model's generation_config.json is not used", "generation_config", GenerationConfigNone)
		return sample.Defaults{}
	}
	for _, why := range gen.Ignored {
		log.Warn("generation_config.json: a sampling parameter is left out", "path", gen.Path, "reason", why)
	}
	if gen.Sampling.Fields() == 0 {
		log.Info("sampling defaults: the server's own; the model recommends none", "generation_config", GenerationConfigAuto)
		return sample.Defaults{}
	}
	log.Info("sampling defaults: the model's generation_config.json, where a request does not set them", "generation_config", GenerationConfigAuto,
		"defaults", gen.Sampling)
	return gen.Sampling
}

// loadTemplates finds the chat templates as transformers does
// (templates.LoadModelTemplates), or compiles the explicit override file. A
// model without a template is not an error here: chat requests then fail
// with chat.ErrNoTemplate instead of getting a guessed format.
func loadTemplates(dir, override string) (def, tools *templates.Template, err error) {
	if override != "" {
		return compileTemplates(nil, override)
	}
	mt, err := templates.LoadModelTemplates(dir)
	if errors.Is(err, templates.ErrNoTemplate) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return compileTemplates(mt, "")
}

// compileTemplates compiles a model's templates (the default one, and
// tool_use when it has one), or the override file when one is given; a
// model without templates (mt nil) has none.
func compileTemplates(mt *templates.ModelTemplates, override string) (def, tools *templates.Template, err error) {
	if override != "" {
		src, err := os.ReadFile(override)
		if err != nil {
			return nil, nil, fmt.Errorf("chat template: %w", err)
		}
		def, err = templates.Compile(string(src), templates.WithName(override))
		return def, nil, err
	}
	if mt == nil {
		return nil, nil, nil
	}
	compile := func(hasTools bool) (*templates.Template, error) {
		src, err := mt.Select("", hasTools)
		if err != nil {
			return nil, err
		}
		return templates.Compile(src, templates.WithName(mt.Origin))
	}
	if def, err = compile(false); err != nil && !errors.Is(err, templates.ErrNoTemplate) {
		return nil, nil, err
	}
	if _, ok := mt.Named["tool_use"]; ok {
		if tools, err = compile(true); err != nil {
			return nil, nil, err
		}
	}
	return def, tools, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// modelEOS is eos_token_id from generation_config.json, else from
// config.json.
func modelEOS(dir string, gen *model.GenerationConfig) ([]int32, error) {
	ids := gen.EOS
	if ids == nil {
		path := filepath.Join(dir, "config.json")
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		c, err := model.ParseConfig(path, data)
		if err != nil {
			return nil, err
		}
		if ids, err = c.Ints("eos_token_id"); err != nil {
			return nil, err
		}
	}
	if ids == nil {
		return nil, nil
	}
	out := make([]int32, len(ids))
	for i, v := range ids {
		out[i] = int32(v)
	}
	return out, nil
}

// LoadModel loads the weights and sets up the device and the KV pool.
func (l *dirLoader) LoadModel(ctx context.Context, phase func(string)) (model.Model, gpu.Device, *kvcache.Pool, error) {
	if l.opts.NoWeights {
		return nil, nil, nil, nil // assets only (actors.Loader)
	}
	phase("loading weights")
	began := time.Now()
	m, err := model.LoadWith(ctx, l.opts.Model, model.LoadOptions{Prefault: true, Progress: l.loadProgress(began), Mmap: l.opts.MmapWeights, Quantize: l.opts.Quantize})
	if err != nil {
		return nil, nil, nil, err
	}
	if l.opts.LoadDelay > 0 {
		select {
		case <-time.After(l.opts.LoadDelay):
		case <-ctx.Done():
			m.Close()
			return nil, nil, nil, ctx.Err()
		}
	}
	phase("starting compute threads")
	dev, closeDev, err := openDevice(l.opts)
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	if p, ok := dev.(gpu.Packer); ok && !l.opts.NoPackedWeights {
		phase("packing weights")
		if n, err := model.PackWeights(m, p); err != nil {
			closeDev()
			m.Close()
			return nil, nil, nil, err
		} else if n > 0 {
			l.opts.Logger.Info("weights packed for the matmul kernels", "bytes", kvcache.FormatBytes(n))
		}
	}
	pool, err := newPool(m, l.opts)
	if err != nil {
		closeDev()
		m.Close()
		return nil, nil, nil, err
	}
	if err := checkMemory(dev, m.Info().DTypeParams, pool.Bytes()); err != nil {
		_ = pool.Close()
		closeDev()
		m.Close()
		return nil, nil, nil, err
	}
	if l.opts.PrefaultKV {
		t0 := time.Now()
		pool.Prefault()
		l.opts.Logger.Debug("KV pool committed", "bytes", kvcache.FormatBytes(pool.Bytes()), "took", time.Since(t0).Round(time.Millisecond))
	}
	l.banner(m, dev, pool, time.Since(began))
	return m, dev, pool, nil
}

// loadProgress reports the weight read: to Options.LoadProgress when set
// (troupe serve draws a bar on a terminal), else as a log line every few
// seconds, so a slow disk shows progress and a fast one logs nothing.
func (l *dirLoader) loadProgress(began time.Time) func(done, total int64) {
	if l.opts.LoadProgress != nil {
		return l.opts.LoadProgress
	}
	last := began
	return func(done, total int64) {
		if now := time.Now(); now.Sub(last) >= loadLogEvery && done < total {
			last = now
			l.opts.Logger.Info("loading weights", "read", kvcache.FormatBytes(done), "of", kvcache.FormatBytes(total),
				"percent", 100*done/max(total, 1))
		}
	}
}

// loadLogEvery is how often a slow weight read logs its progress.
const loadLogEvery = 2 * time.Second

// banner logs what the server runs with, once the model is loaded: the
// model, its weights, the kernels and threads, the KV pool in tokens, the
// context one request may use and the prompt-cache mode.
func (l *dirLoader) banner(m model.Model, dev gpu.Device, pool *kvcache.Pool, took time.Duration) {
	info := m.Info()
	lim := engine.LimitsOf(m, pool, l.opts.MaxModelLen)
	cache := "off"
	switch {
	case !l.opts.PromptCache:
	case model.SnapshotReuse(m.Cache()):
		cache = "snapshots"
	default:
		cache = "prefix pages"
	}
	kv := "unbounded (recurrent state)"
	if pool.PagesFor(1) > 0 {
		kv = strconv.Itoa(pool.NumPages()*pool.PageSize()) + " tokens"
	}
	ctxLen := "unbounded"
	if c := lim.Context(); c > 0 {
		ctxLen = strconv.Itoa(c)
	}
	l.opts.Logger.Info("model loaded", "arch", info.Arch, "params", info.Params,
		"weights", kvcache.FormatBytes(info.WeightBytes), "dtype", info.DType.String(), "huge_pages", info.HugePages, "kernels", dev.Name(),
		"threads", l.opts.Threads, "kv_budget", kvcache.FormatBytes(l.opts.KVBudget), "kv_pool", kv, "kv_committed", l.opts.PrefaultKV, "state_slots", pool.NumSlots(), "context", ctxLen,
		"parallel", l.opts.Parallel, "prompt_cache", cache, "boundary_snapshots", l.opts.BoundarySnapshots.String(), "load_time", took.Round(time.Millisecond))
}

// newPool sizes the KV pool from the budget: on a model that reuses
// prompts by snapshots the snapshot share comes off first (the engine gets
// the same figure through engine.Options.SnapshotBudget), then one state
// slot per running sequence, then pages.
func newPool(m model.Model, opts Options) (*kvcache.Pool, error) {
	layout := model.PoolLayout(m.Cache())
	var snaps int64
	if opts.PromptCache && model.SnapshotReuse(m.Cache()) {
		snaps = opts.SnapshotBudget
	}
	plan, err := kvcache.PlanBudget(layout, pageSize, opts.KVBudget, snaps, opts.Parallel)
	if err != nil {
		return nil, fmt.Errorf("KV budget: %w", err)
	}
	pool, err := kvcache.NewPool(layout, pageSize, plan.Pages, plan.Slots)
	if err != nil {
		return nil, err
	}
	opts.Logger.Debug("KV budget", "budget", kvcache.FormatBytes(opts.KVBudget), "pool", kvcache.FormatBytes(pool.Bytes()),
		"pages", pool.NumPages(), "state_slots", pool.NumSlots(), "snapshots", kvcache.FormatBytes(snaps))
	if pool.HasState() && pool.NumSlots() < opts.Parallel {
		opts.Logger.Warn("the KV budget holds fewer state slots than --parallel: fewer sequences run at once",
			"state_slots", pool.NumSlots(), "parallel", opts.Parallel)
	}
	return pool, nil
}

// memoryChecker is a device that checks, before it holds the weights, that
// the model fits in its memory (gpu/cuda's Device.CheckMemory): weights of
// the given parameter counts by dtype and kvBytes of KV pool.
type memoryChecker interface {
	CheckMemory(params map[gpu.DType]int64, kvBytes int64) error
}

// checkMemory runs dev's memory check when it has one (a CUDA device; the
// CPU's memory is the process's, checked by nothing here): params is the
// model's model.Info.DTypeParams, kvBytes the KV pool's size.
func checkMemory(dev gpu.Device, params map[gpu.DType]int64, kvBytes int64) error {
	mc, ok := dev.(memoryChecker)
	if !ok {
		return nil
	}
	if err := mc.CheckMemory(params, kvBytes); err != nil {
		return fmt.Errorf("loading the model on %s: %w", dev.Name(), err)
	}
	return nil
}
