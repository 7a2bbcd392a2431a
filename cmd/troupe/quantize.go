package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/troupe-ai/troupe/convert"
	"github.com/troupe-ai/troupe/quant"
)

// cmdQuantize writes a Hugging Face checkpoint folder as a GGUF file.
func cmdQuantize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	names := make([]string, len(quant.FileTypes))
	for i, t := range quant.FileTypes {
		names[i] = string(t)
	}
	typ := fs.String("type", "", "file type: "+strings.Join(names, ", ")+" (f32/f16/bf16 keep the weights unquantized, so llama.cpp and troupe run the same ones)")
	in := fs.String("in", "", "checkpoint folder (config.json, safetensors, tokenizer.json)")
	out := fs.String("out", "", "GGUF file to write")
	name := fs.String("name", "", "general.name (default: the folder's name)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("quantize: unexpected argument %q", fs.Arg(0))
	}
	if *typ == "" || *in == "" || *out == "" {
		return errors.New("quantize: give --type, --in DIR and --out FILE.gguf")
	}
	ft, err := quant.ParseFileType(*typ)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	start := time.Now()
	if err := convert.Write(*in, *out, convert.Options{Type: ft, Name: *name}); err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	st, err := os.Stat(*out)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %.1f MB in %.1fs\n", *out, ft, float64(st.Size())/1e6, time.Since(start).Seconds())
	return nil
}
