package templates

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ModelTemplates are the chat templates a model folder declares, found as
// transformers finds them:
//
//   - chat_template.jinja beside tokenizer_config.json is the default
//     template and replaces any template in the config ("clobbers", in
//     transformers' words); additional_chat_templates/NAME.jinja files add
//     named templates;
//   - otherwise tokenizer_config.json's "chat_template": a string, or a
//     list of {"name", "template"} objects (named templates, of which
//     "default" and "tool_use" are picked automatically);
//   - otherwise chat_template.json's "chat_template" (the processor's
//     file of multimodal models), in the same two forms.
type ModelTemplates struct {
	// Default is the template used when no name is asked for and the
	// tool_use template does not apply; "" when the model has none.
	Default string
	// Named holds the named templates, including "default" when there is
	// one; nil for a model with a single template.
	Named map[string]string
	// Origin is the file the templates came from, for messages.
	Origin string
}

// LoadModelTemplates reads the chat templates of the model folder dir. A
// folder without any template is an error wrapping ErrNoTemplate, so a
// model without a template fails clearly instead of getting a guessed
// format.
func LoadModelTemplates(dir string) (*ModelTemplates, error) {
	m := &ModelTemplates{}
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	src, err := os.ReadFile(jinjaPath)
	switch {
	case err == nil:
		m.Default, m.Origin = string(src), jinjaPath
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("templates: reading %s: %w", jinjaPath, err)
	}
	extra, err := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	if err != nil {
		return nil, err
	}
	if m.Origin != "" {
		if len(extra) > 0 {
			m.Named = map[string]string{"default": m.Default}
			for _, p := range extra {
				b, err := os.ReadFile(p)
				if err != nil {
					return nil, fmt.Errorf("templates: reading %s: %w", p, err)
				}
				m.Named[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
			}
		}
		return m, nil
	}
	for _, name := range []string{"tokenizer_config.json", "chat_template.json"} {
		path := filepath.Join(dir, name)
		cfg, err := readJSONObject(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ct, ok := cfg.Get("chat_template")
		if !ok || ct == nil {
			continue
		}
		if err := m.setFrom(ct, path); err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: no chat_template in %s/tokenizer_config.json and no chat_template.jinja; give a template file explicitly", ErrNoTemplate, dir)
}

func (m *ModelTemplates) setFrom(ct any, path string) error {
	m.Origin = path
	switch x := ct.(type) {
	case string:
		m.Default = x
		return nil
	case []any:
		m.Named = map[string]string{}
		for _, e := range x {
			d, ok := e.(*Dict)
			if !ok {
				return fmt.Errorf("templates: %s: chat_template list entries must be objects", path)
			}
			name, _ := d.Get("name")
			src, _ := d.Get("template")
			ns, ok1 := name.(string)
			ss, ok2 := src.(string)
			if !ok1 || !ok2 {
				return fmt.Errorf("templates: %s: chat_template entries need a string name and template", path)
			}
			m.Named[ns] = ss
		}
		m.Default = m.Named["default"]
		return nil
	}
	return fmt.Errorf("templates: %s: chat_template is a %s, not a string or a list", path, typeName(ct))
}

// Select picks the template source for a request, as transformers'
// get_chat_template does: the template called name when one is given;
// otherwise "tool_use" when the request has tools (tools not None) and the
// model has such a template, else the default.
func (m *ModelTemplates) Select(name string, hasTools bool) (string, error) {
	if m.Named != nil {
		if name != "" {
			if src, ok := m.Named[name]; ok {
				return src, nil
			}
			return "", fmt.Errorf("templates: %s has no chat template named %q (it has %s)", m.Origin, name, strings.Join(m.names(), ", "))
		}
		if src, ok := m.Named["tool_use"]; ok && hasTools {
			return src, nil
		}
		if src, ok := m.Named["default"]; ok {
			return src, nil
		}
		return "", fmt.Errorf("%w: %s has several chat templates and none is named \"default\"; name one of %s", ErrNoTemplate, m.Origin, strings.Join(m.names(), ", "))
	}
	if name != "" && name != "default" {
		return "", fmt.Errorf("templates: %s has a single chat template, not one named %q", m.Origin, name)
	}
	if m.Default == "" {
		return "", fmt.Errorf("%w: %s", ErrNoTemplate, m.Origin)
	}
	return m.Default, nil
}

func (m *ModelTemplates) names() []string {
	names := make([]string, 0, len(m.Named))
	for n := range m.Named {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// specialTokenAttrs is transformers' SPECIAL_TOKENS_ATTRIBUTES, in order.
func specialTokenAttrs() []string {
	return []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens"}
}

// LoadSpecialTokens returns the model folder's special_tokens_map as
// transformers builds it and passes it to chat templates: bos_token,
// eos_token, unk_token, sep_token, pad_token, cls_token, mask_token and
// additional_special_tokens when set (non-empty), then the model's
// extra_special_tokens (e.g. Gemma 3's boi_token, eoi_token, image_token).
// Values come from tokenizer_config.json, overridden by
// special_tokens_map.json when present; AddedToken objects give their
// "content". A folder with neither file gives an empty Dict.
func LoadSpecialTokens(dir string) (*Dict, error) {
	values := map[string]any{}
	var extra []string
	for _, name := range []string{"tokenizer_config.json", "special_tokens_map.json"} {
		path := filepath.Join(dir, name)
		cfg, err := readJSONObject(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, attr := range specialTokenAttrs() {
			if v, ok := cfg.Get(attr); ok {
				values[attr] = v
			}
		}
		if est, ok := cfg.Get("extra_special_tokens"); ok {
			if d, ok := est.(*Dict); ok {
				d.Range(func(k, v any) bool {
					ks := k.(string)
					if !slices.Contains(extra, ks) {
						extra = append(extra, ks)
					}
					values[ks] = v
					return true
				})
			}
		}
	}
	out := NewDict(len(values))
	for _, attr := range append(specialTokenAttrs(), extra...) {
		v, ok := values[attr]
		if !ok {
			continue
		}
		if l, ok := v.([]any); ok {
			strs := make([]any, 0, len(l))
			for _, e := range l {
				if s := tokenContent(e); s != "" {
					strs = append(strs, s)
				}
			}
			if len(strs) > 0 {
				out.Set(attr, strs)
			}
			continue
		}
		if s := tokenContent(v); s != "" {
			out.Set(attr, s)
		}
	}
	return out, nil
}

// tokenContent is the text of a special token given as a string or an
// AddedToken object.
func tokenContent(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case *Dict:
		c, _ := x.Get("content")
		s, _ := c.(string)
		return s
	}
	return ""
}

func readJSONObject(path string) (*Dict, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v, err := DecodeJSON(b)
	if err != nil {
		return nil, fmt.Errorf("templates: %s: %w", path, err)
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("templates: %s is not a JSON object", path)
	}
	return d, nil
}
