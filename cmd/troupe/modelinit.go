package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/tokenizer"
)

func cmdModelInit(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("model init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	preset := fs.String("preset", "", "named configuration: "+strings.Join(checkpoint.PresetNames(), ", "))
	arch := fs.String("arch", "", "architecture of a tiny configuration: "+strings.Join(checkpoint.Archs(), ", "))
	config := fs.String("config", "", "config.json to use instead of a preset")
	dtype := fs.String("dtype", "f32", "weight dtype: f32 or bf16")
	seed := fs.Uint64("seed", 0, "random seed of the weights")
	tok := fs.String("tokenizer", "", "folder with tokenizer.json (and tokenizer_config.json, chat_template.jinja) to copy; sets vocab size and BOS/EOS")
	byteTok := fs.Bool("byte-tokenizer", false, "add a byte-level tokenizer with a ChatML template, padded to the config's vocabulary size (a servable benchmark checkpoint)")
	script := fs.String("script", "", "make a script model: after a prompt ending in this text's first token it generates the rest of the text (tokenized with the model's tokenizer; a test device for predictable output)")
	out := fs.String("out", "", "output folder")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" {
		return errors.New("model init: --out is required")
	}
	var cfg checkpoint.Config
	var err error
	switch {
	case *preset != "" && *config != "":
		return errors.New("model init: give --preset or --config, not both")
	case *preset != "":
		cfg, err = checkpoint.Preset(*preset)
	case *config != "":
		cfg, err = checkpoint.ReadConfig(*config)
	case *arch != "":
		cfg, err = checkpoint.Tiny(*arch)
	default:
		return errors.New("model init: give --preset NAME, --arch NAME or --config FILE")
	}
	if err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	if *arch != "" && (*preset != "" || *config != "") {
		if mt, _ := cfg["model_type"].(string); mt != *arch {
			if *preset == "tiny" {
				if cfg, err = checkpoint.Tiny(*arch); err != nil {
					return fmt.Errorf("model init: %w", err)
				}
			} else {
				return fmt.Errorf("model init: --arch %s does not match the configuration's model_type %q", *arch, mt)
			}
		}
	}
	// Write into a temporary folder beside the destination and rename it
	// at the end: the destination never holds half a model, and a failed
	// init leaves nothing behind.
	final := *out
	staging, err := stage(final)
	if err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	defer os.RemoveAll(staging) // gone after the rename; cleans up a failure
	*out = staging
	opt := checkpoint.Options{Seed: *seed}
	switch *dtype {
	case "f32":
		opt.DType = gpu.F32
	case "bf16":
		opt.DType = gpu.BF16
	default:
		return fmt.Errorf("model init: --dtype must be f32 or bf16, got %q", *dtype)
	}
	if *tok != "" {
		if err := checkpoint.AdoptTokenizer(cfg, *tok, *out); err != nil {
			return fmt.Errorf("model init: %w", err)
		}
	}
	vocab, _ := cfg["vocab_size"].(int)
	if f, ok := cfg["vocab_size"].(float64); ok { // from a config file
		vocab = int(f)
	}
	if *byteTok {
		if *tok != "" {
			return errors.New("model init: give --tokenizer or --byte-tokenizer, not both")
		}
		if vocab < checkpoint.ByteVocab {
			return fmt.Errorf("model init: --byte-tokenizer needs a vocabulary of at least %d, the config has %d", checkpoint.ByteVocab, vocab)
		}
		cfg["eos_token_id"] = checkpoint.ByteVocab - 1
		delete(cfg, "bos_token_id")
	}
	if *byteTok {
		if err := checkpoint.WriteByteTokenizerSized(*out, vocab); err != nil {
			return fmt.Errorf("model init: %w", err)
		}
	}
	if *script != "" {
		if *tok == "" && !*byteTok {
			return errors.New("model init: --script needs --tokenizer or --byte-tokenizer")
		}
		t, err := tokenizer.Load(*out, tokenizer.Options{})
		if err != nil {
			return fmt.Errorf("model init: --script: %w", err)
		}
		opt.Script = t.EncodeIDs(*script, false)
	}
	if err := checkpoint.Write(*out, cfg, opt); err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	// An empty destination folder (checked by stage) makes way: os.Rename
	// does not replace directories.
	if err := os.Remove(final); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("model init: %w", err)
	}
	if err := os.Rename(staging, final); err != nil {
		return fmt.Errorf("model init: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", final)
	return nil
}

// stage checks that dir can receive a new model (it does not exist yet, or
// is an empty folder) and returns a fresh temporary folder beside it,
// creating dir's parent folders as needed.
func stage(dir string) (string, error) {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("--out %s is a file, not a folder", dir)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return "", err
		}
		if len(entries) > 0 {
			return "", fmt.Errorf("--out %s already exists and is not empty; choose a new folder or remove it", dir)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(filepath.Clean(dir))+".tmp-")
	if err != nil {
		return "", err
	}
	// MkdirTemp makes the folder 0700; a model folder is as readable as
	// any other.
	return tmp, os.Chmod(tmp, 0o755)
}
