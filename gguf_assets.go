package troupe

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/gguf"
	"github.com/troupe-ai/troupe/model"
	"github.com/troupe-ai/troupe/templates"
	"github.com/troupe-ai/troupe/tokenizer"
)

// ggufModel reports whether the model path names a GGUF model, and which
// file holds its metadata (model.GGUFFile: the path itself when it is a
// file — a .gguf, a split set's first part, an Ollama blob — or the GGUF
// model of a folder without config.json).
func ggufModel(path string) (string, bool, error) {
	file, err := model.GGUFFile(path)
	return file, file != "", err
}

// loadGGUFAssets reads the tokenizer, chat templates and special tokens of
// a GGUF model from the file's metadata; a folder's own tokenizer.json,
// chat templates and tokenizer_config.json win where present, as they do
// for llama.cpp's --jinja users who keep them beside the file.
func (l *dirLoader) loadGGUFAssets(path, file string) (*chat.Assets, error) {
	f, err := gguf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir := ""
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		dir = path
	}
	var tok *tokenizer.Tokenizer
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
			if tok, err = tokenizer.Load(dir, tokenizer.Options{}); err != nil {
				return nil, err
			}
		}
	}
	if tok == nil {
		if tok, err = tokenizer.LoadGGUFFile(f, tokenizer.Options{}); err != nil {
			return nil, err
		}
	}
	a := &chat.Assets{Tokenizer: tok}
	src, err := ggufTemplates(dir, f)
	if err != nil {
		return nil, err
	}
	if a.Template, a.ToolTemplate, err = compileTemplates(src, l.opts.ChatTemplate); err != nil {
		return nil, err
	}
	if a.SpecialTokens, err = ggufSpecialTokens(dir, f, tok); err != nil {
		return nil, err
	}
	gen := &model.GenerationConfig{}
	if dir != "" {
		if gen, err = model.ReadGenerationConfig(dir); err != nil {
			return nil, err
		}
	}
	// End of generation: the tokenizer's EOS and llama.cpp's other
	// end-of-generation ids the file names (end of turn, end of message).
	for _, key := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"} {
		if id, err := f.Int(key); err == nil && !containsID(a.EOS, int32(id)) {
			a.EOS = append(a.EOS, int32(id))
		}
	}
	for _, id := range gen.EOS {
		if !containsID(a.EOS, int32(id)) {
			a.EOS = append(a.EOS, int32(id))
		}
	}
	if id, ok := tok.EOS(); ok && !containsID(a.EOS, id) {
		a.EOS = append(a.EOS, id)
	}
	a.Sampling = l.samplingDefaults(gen)
	return a, nil
}

// ggufTemplates are the folder's chat templates when it has any, else the
// file's tokenizer.chat_template (and its named ones); nil when neither
// has one.
func ggufTemplates(dir string, f *gguf.File) (*templates.ModelTemplates, error) {
	if dir != "" {
		mt, err := templates.LoadModelTemplates(dir)
		if err == nil {
			return mt, nil
		}
		if !errors.Is(err, templates.ErrNoTemplate) {
			return nil, err
		}
	}
	def, err := tokenizer.GGUFChatTemplate(f)
	if err != nil {
		return nil, err
	}
	named, err := tokenizer.GGUFNamedChatTemplates(f)
	if err != nil {
		return nil, err
	}
	if def == "" && len(named) == 0 {
		return nil, nil
	}
	mt := &templates.ModelTemplates{Default: def, Origin: f.Path + " (tokenizer.chat_template)"}
	if len(named) > 0 {
		mt.Named = named
		if def != "" {
			mt.Named["default"] = def
		}
	}
	return mt, nil
}

// ggufSpecialTokens are the special tokens templates see (bos_token,
// eos_token, ...): the folder's tokenizer_config.json when it has one,
// else the file's special ids spelled as tokens.
func ggufSpecialTokens(dir string, f *gguf.File, tok *tokenizer.Tokenizer) (*templates.Dict, error) {
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err == nil {
			return templates.LoadSpecialTokens(dir)
		}
	}
	d := templates.NewDict(4)
	for _, s := range []struct{ attr, key string }{
		{"bos_token", "tokenizer.ggml.bos_token_id"}, {"eos_token", "tokenizer.ggml.eos_token_id"},
		{"unk_token", "tokenizer.ggml.unknown_token_id"}, {"pad_token", "tokenizer.ggml.padding_token_id"},
	} {
		id, err := f.Int(s.key)
		if err != nil {
			continue
		}
		if text, ok := tok.IDToken(int32(id)); ok {
			d.Set(s.attr, text)
		}
	}
	return d, nil
}
