package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/troupe-ai/troupe/tokenizer"
)

// tokenizeRequest is one input line of `troupe tokenize`.
type tokenizeRequest struct {
	Text             *string `json:"text"`
	AddSpecialTokens *bool   `json:"add_special_tokens"`
	// SplitSpecialTokens tokenizes special-token text as plain text
	// (transformers' split_special_tokens, llama-tokenize
	// --no-parse-special).
	SplitSpecialTokens bool `json:"split_special_tokens"`
}

type tokenizeResponse struct {
	IDs     []int32  `json:"ids"`
	Tokens  []string `json:"tokens"`
	Offsets [][2]int `json:"offsets"`
}

// detokenizeRequest is one input line of `troupe detokenize`.
type detokenizeRequest struct {
	IDs               *[]int32 `json:"ids"`
	SkipSpecialTokens bool     `json:"skip_special_tokens"`
}

type detokenizeResponse struct {
	Text string `json:"text"`
}

type errorResponse struct {
	Error string `json:"error"`
}

// cmdTokenize reads JSON lines {"text": ..., "add_special_tokens": ...,
// "split_special_tokens": ...} and writes one JSON line of ids, tokens and
// byte offsets per input line.
func cmdTokenize(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	tk, err := loadTokenizerFlags("tokenize", args, stderr)
	if err != nil {
		return err
	}
	return jsonLines(ctx, stdin, stdout, func(line []byte) (any, error) {
		var req tokenizeRequest
		if err := strictUnmarshal(line, &req); err != nil {
			return nil, err
		}
		if req.Text == nil {
			return nil, errors.New(`missing "text"`)
		}
		add := req.AddSpecialTokens == nil || *req.AddSpecialTokens
		enc := tk.Encode(*req.Text, add)
		if req.SplitSpecialTokens {
			enc = tk.EncodeSplitSpecial(*req.Text, add)
		}
		resp := tokenizeResponse{IDs: enc.IDs, Tokens: enc.Tokens, Offsets: enc.Offsets}
		if resp.IDs == nil {
			resp.IDs, resp.Tokens, resp.Offsets = []int32{}, []string{}, [][2]int{}
		}
		return resp, nil
	})
}

// cmdDetokenize reads JSON lines {"ids": [...], "skip_special_tokens": ...}
// and writes one JSON line {"text": ...} per input line.
func cmdDetokenize(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	tk, err := loadTokenizerFlags("detokenize", args, stderr)
	if err != nil {
		return err
	}
	return jsonLines(ctx, stdin, stdout, func(line []byte) (any, error) {
		var req detokenizeRequest
		if err := strictUnmarshal(line, &req); err != nil {
			return nil, err
		}
		if req.IDs == nil {
			return nil, errors.New(`missing "ids"`)
		}
		return detokenizeResponse{Text: tk.Decode(*req.IDs, req.SkipSpecialTokens)}, nil
	})
}

func loadTokenizerFlags(name string, args []string, stderr io.Writer) (*tokenizer.Tokenizer, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("tokenizer", "", "folder holding tokenizer.json (and optionally tokenizer_config.json), a GGUF file, or a folder holding one GGUF model (tokenizer.json wins); a model folder works")
	raw := fs.Bool("raw", false, "tokenizer.json behaviour only (no add_bos_token / clean_up_tokenization_spaces from tokenizer_config.json; for GGUF no clean-up of decoded spaces)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: troupe %s --tokenizer DIR|FILE.gguf [--raw] < requests.jsonl\n", name)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	if *dir == "" {
		return nil, fmt.Errorf("%s: --tokenizer DIR or FILE.gguf is required", name)
	}
	tk, err := tokenizer.LoadPath(*dir, tokenizer.Options{Raw: *raw})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return tk, nil
}

// strictUnmarshal decodes exactly one JSON object.
func strictUnmarshal(line []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request: %w", err)
	}
	if dec.More() {
		return errors.New("bad request: trailing data after the JSON object")
	}
	return nil
}

// jsonLines answers each input line (split on "\n" only) with one output
// line: handle's result, or {"error": ...} when it fails.
func jsonLines(ctx context.Context, stdin io.Reader, stdout io.Writer, handle func([]byte) (any, error)) error {
	in := bufio.NewReaderSize(stdin, 1<<16)
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		if err := ctx.Err(); err != nil {
			out.Flush()
			return err
		}
		line, readErr := in.ReadBytes('\n')
		if len(line) > 0 {
			var resp any
			if body := bytes.TrimSpace(line); len(body) == 0 {
				resp = errorResponse{Error: "empty line"}
			} else if r, err := handle(body); err != nil {
				resp = errorResponse{Error: err.Error()}
			} else {
				resp = r
			}
			if err := enc.Encode(resp); err != nil {
				return fmt.Errorf("writing output: %w", err)
			}
			if in.Buffered() == 0 {
				if err := out.Flush(); err != nil {
					return fmt.Errorf("writing output: %w", err)
				}
			}
		}
		if readErr == io.EOF {
			return out.Flush()
		}
		if readErr != nil {
			out.Flush()
			return fmt.Errorf("reading input: %w", readErr)
		}
	}
}
