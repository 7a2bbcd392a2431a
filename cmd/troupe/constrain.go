package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/troupe-ai/troupe/grammar"
)

// constrainRequest is one input line of `troupe constrain`.
type constrainRequest struct {
	Schema json.RawMessage `json:"schema"`
	Texts  []string        `json:"texts"`
}

type constrainResponse struct {
	Compiled  bool      `json:"compiled"`
	Error     string    `json:"error,omitempty"`
	CompileUS float64   `json:"compile_us"`
	Accepted  []bool    `json:"accepted"`
	MaskUS    []float64 `json:"mask_us"`
}

// cmdConstrain checks the structured-output engine in isolation: it reads
// JSON lines {"schema": <JSON Schema>, "texts": [...]} and writes one line
// per input: whether the schema compiled (and why not), the time of its
// first compile, whether each text is accepted (its normal tokenization,
// without special tokens, allowed by the mask at every token, and EOS
// allowed after the last) and the time of every token mask computed.
func cmdConstrain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	tk, err := loadTokenizerFlags("constrain", args, stderr)
	if err != nil {
		return err
	}
	eos, _ := tk.EOS()
	vocab := grammar.NewVocab(tk.AllTokenBytes(), []int32{eos})
	mask := grammar.NewMask(vocab.Size())
	return jsonLines(ctx, stdin, stdout, func(line []byte) (any, error) {
		var req constrainRequest
		if err := strictUnmarshal(line, &req); err != nil {
			return nil, err
		}
		if len(req.Schema) == 0 {
			return nil, errors.New(`missing "schema"`)
		}
		resp := constrainResponse{Accepted: []bool{}, MaskUS: []float64{}}
		t0 := time.Now()
		g, err := grammar.CompileSchema(req.Schema)
		resp.CompileUS = float64(time.Since(t0).Nanoseconds()) / 1e3
		if err != nil {
			resp.Error = err.Error()
			return resp, nil
		}
		resp.Compiled = true
		for _, text := range req.Texts {
			m := grammar.NewMatcher(g)
			ok := true
			for _, id := range tk.EncodeIDs(text, false) {
				t := time.Now()
				vocab.Fill(m, mask)
				resp.MaskUS = append(resp.MaskUS, float64(time.Since(t).Nanoseconds())/1e3)
				bs, _ := tk.TokenBytes(id)
				if !mask.Has(id) || !m.AdvanceBytes(bs) {
					ok = false
					break
				}
			}
			if ok {
				t := time.Now()
				vocab.Fill(m, mask)
				resp.MaskUS = append(resp.MaskUS, float64(time.Since(t).Nanoseconds())/1e3)
				ok = mask.Has(eos)
			}
			resp.Accepted = append(resp.Accepted, ok)
		}
		return resp, nil
	})
}
