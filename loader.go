package troupe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
	"github.com/troupe-ai/troupe/kvcache"
	"github.com/troupe-ai/troupe/model"
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
	tok, err := tokenizer.Load(dir, tokenizer.Options{})
	if err != nil {
		return nil, err
	}
	a := &chat.Assets{Tokenizer: tok}
	cfg := map[string]any{}
	if data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tokenizer_config.json"), err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if a.Template, a.ToolTemplate, err = loadTemplates(dir, cfg, l.opts.ChatTemplate); err != nil {
		return nil, err
	}
	a.SpecialTokens = templates.NewDict(8)
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "pad_token"} {
		if name := tokenizer.TokenName(cfg[key]); name != "" {
			a.SpecialTokens.Set(key, name)
		}
	}
	eos, err := modelEOS(dir)
	if err != nil {
		return nil, err
	}
	if id, ok := tok.EOS(); ok && !containsID(eos, id) {
		eos = append(eos, id)
	}
	a.EOS = eos
	return a, nil
}

// loadTemplates finds the chat template as transformers does: an explicit
// file wins; else tokenizer_config.json's chat_template (a string, or a list
// of named templates of which "default" and "tool_use" are used); else
// chat_template.jinja beside it. No template is not an error here: chat
// requests fail with chat.ErrNoTemplate.
func loadTemplates(dir string, cfg map[string]any, override string) (def, tools *templates.Template, err error) {
	compile := func(name, src string) (*templates.Template, error) {
		t, err := templates.Compile(src, templates.WithName(name))
		if err != nil {
			return nil, fmt.Errorf("chat template %s: %w", name, err)
		}
		return t, nil
	}
	if override != "" {
		src, err := os.ReadFile(override)
		if err != nil {
			return nil, nil, fmt.Errorf("chat template: %w", err)
		}
		def, err = compile(override, string(src))
		return def, nil, err
	}
	switch ct := cfg["chat_template"].(type) {
	case string:
		def, err = compile("tokenizer_config.json", ct)
		return def, nil, err
	case []any:
		for _, e := range ct {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			src, _ := m["template"].(string)
			switch name {
			case "default":
				if def, err = compile("tokenizer_config.json:default", src); err != nil {
					return nil, nil, err
				}
			case "tool_use":
				if tools, err = compile("tokenizer_config.json:tool_use", src); err != nil {
					return nil, nil, err
				}
			}
		}
		return def, tools, nil
	}
	src, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("chat template: %w", err)
	}
	def, err = compile("chat_template.jinja", string(src))
	return def, nil, err
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// modelEOS reads eos_token_id from generation_config.json, else config.json.
func modelEOS(dir string) ([]int32, error) {
	for _, name := range []string{"generation_config.json", "config.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c, err := model.ParseConfig(filepath.Join(dir, name), data)
		if err != nil {
			return nil, err
		}
		ids, err := c.Ints("eos_token_id")
		if err != nil {
			return nil, err
		}
		if ids != nil {
			out := make([]int32, len(ids))
			for i, v := range ids {
				out[i] = int32(v)
			}
			return out, nil
		}
	}
	return nil, nil
}

// LoadModel loads the weights and sets up the device and the KV pool.
func (l *dirLoader) LoadModel(ctx context.Context, phase func(string)) (model.Model, gpu.Device, *kvcache.Pool, error) {
	phase("loading weights")
	m, err := model.Load(l.opts.Model)
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
	dev, err := cpu.New(cpu.Options{Threads: l.opts.Threads})
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	layout := model.PoolLayout(m.Cache())
	pages := kvcache.PagesForBudget(layout.KVDims, pageSize, l.opts.KVBudget)
	if pages < 1 {
		pages = 1
	}
	pool, err := kvcache.NewPool(layout, pageSize, pages, l.opts.Parallel)
	if err != nil {
		dev.Close()
		m.Close()
		return nil, nil, nil, err
	}
	return m, dev, pool, nil
}
