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
	"io/fs"
	"os"
	"time"

	"github.com/troupe-ai/troupe/model/checkpoint"
	"github.com/troupe-ai/troupe/templates"
)

const renderUsage = `usage: troupe render [--template FILE] [--model DIR] < requests.jsonl

Renders chat templates as transformers' apply_chat_template(tokenize=False)
does. Each input line is a JSON object:

  {"template": "PATH" | null, "model": "DIR" | null, "messages": [...],
   "tools": [...] | null, "documents": [...] | null,
   "add_generation_prompt": true, "special_tokens": {...} | null,
   "kwargs": {...}, "now": "2025-01-15T10:30:00", "template_name": "tool_use"}

The template comes from "template", else --template, else the model folder
("model", else --model: chat_template.jinja or tokenizer_config.json's
chat_template, "tool_use" when tools are given), else the built-in demo
model's ChatML template. Special tokens come from
"special_tokens", else the model folder's tokenizer_config.json. strftime_now
uses "now" (naive local time) when given. Each output line is
{"prompt": "..."} or {"error": {"type": "TemplateError" | ..., "message": "..."}}.

flags:
`

// renderRequest is one input line of troupe render.
type renderRequest struct {
	Template            string
	Model               string
	TemplateName        string
	Messages            []any
	Tools, Documents    any
	AddGenerationPrompt bool
	SpecialTokens       *templates.Dict
	HasSpecialTokens    bool
	Kwargs              *templates.Dict
	Now                 time.Time
}

// renderError is the "error" object of an output line.
type renderError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// renderResult is one output line: a prompt or an error.
type renderResult struct {
	Prompt *string      `json:"prompt,omitempty"`
	Error  *renderError `json:"error,omitempty"`
}

// modelInfo caches what troupe render read from a model folder.
type modelInfo struct {
	tmpls    *templates.ModelTemplates
	tmplsErr error
	special  *templates.Dict
	specErr  error
}

// renderCLI is the state of one troupe render run: compiled templates and
// model folders, each read once.
type renderCLI struct {
	defaultTemplate string
	defaultModel    string
	compiled        map[string]*templates.Template // by source
	compileErr      map[string]error
	files           map[string]string // template path -> source
	models          map[string]*modelInfo
}

// cmdRender implements "troupe render": JSON request lines on stdin, one
// {"prompt"} or {"error"} line per request on stdout.
func cmdRender(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("render", flag.ContinueOnError)
	flags.SetOutput(stderr)
	flags.Usage = func() {
		fmt.Fprint(stderr, renderUsage)
		flags.PrintDefaults()
	}
	tmpl := flags.String("template", "", "chat template file for lines without \"template\"; overrides model folders' templates")
	model := flags.String("model", "", "model folder for lines without \"model\" (templates and special tokens)")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() > 0 {
		return fmt.Errorf("render: unexpected argument %q", flags.Arg(0))
	}
	r := &renderCLI{
		defaultTemplate: *tmpl,
		defaultModel:    *model,
		compiled:        map[string]*templates.Template{},
		compileErr:      map[string]error{},
		files:           map[string]string{},
		models:          map[string]*modelInfo{},
	}
	in := bufio.NewReaderSize(stdin, 1<<20)
	out := bufio.NewWriter(stdout)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	for {
		if err := ctx.Err(); err != nil {
			out.Flush()
			return err
		}
		line, rerr := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if err := enc.Encode(r.renderLine(line)); err != nil {
				return fmt.Errorf("render: writing output: %w", err)
			}
			if err := out.Flush(); err != nil {
				return fmt.Errorf("render: writing output: %w", err)
			}
		}
		if rerr == io.EOF {
			return out.Flush()
		}
		if rerr != nil {
			out.Flush()
			return fmt.Errorf("render: reading input: %w", rerr)
		}
	}
}

// renderLine renders one request line; every failure becomes an error
// result, so one bad line does not stop the stream.
func (r *renderCLI) renderLine(line []byte) renderResult {
	req, err := parseRenderRequest(bytes.TrimSpace(line))
	if err != nil {
		return errResult("JSONDecodeError", err.Error())
	}
	tpl, special, err := r.resolve(req)
	if err != nil {
		return resultFromErr(err)
	}
	if req.HasSpecialTokens {
		special = req.SpecialTokens
	}
	prompt, err := tpl.RenderChat(templates.ChatInput{
		Messages:            req.Messages,
		Tools:               req.Tools,
		Documents:           req.Documents,
		AddGenerationPrompt: req.AddGenerationPrompt,
		SpecialTokens:       special,
		Kwargs:              req.Kwargs,
		Now:                 req.Now,
	})
	if err != nil {
		return resultFromErr(err)
	}
	return renderResult{Prompt: &prompt}
}

// errResult is an output line reporting an error of Python type typ.
func errResult(typ, msg string) renderResult {
	return renderResult{Error: &renderError{Type: typ, Message: msg}}
}

// resultFromErr reports err with the type transformers would raise.
func resultFromErr(err error) renderResult {
	var te *templates.Error
	switch {
	case errors.As(err, &te):
		return errResult(te.Type, te.Message)
	case errors.Is(err, templates.ErrNoTemplate):
		return errResult("ValueError", err.Error())
	case errors.Is(err, fs.ErrNotExist):
		return errResult("FileNotFoundError", err.Error())
	}
	return errResult("ValueError", err.Error())
}

// resolve finds the compiled template and the model's special tokens for
// a request.
func (r *renderCLI) resolve(req *renderRequest) (*templates.Template, *templates.Dict, error) {
	modelDir := req.Model
	if modelDir == "" {
		modelDir = r.defaultModel
	}
	if modelDir == "" && req.Template == "" && r.defaultTemplate == "" {
		// As serve and generate do, the built-in demo model stands in when
		// nothing names a template, so "troupe render" works as first typed.
		dir, err := checkpoint.Demo()
		if err != nil {
			return nil, nil, err
		}
		modelDir = dir
	}
	var mi *modelInfo
	if modelDir != "" {
		mi = r.model(modelDir)
	}
	var special *templates.Dict
	if mi != nil && !req.HasSpecialTokens {
		if mi.specErr != nil {
			return nil, nil, mi.specErr
		}
		special = mi.special
	}
	var src, name string
	switch path := firstNonEmpty(req.Template, r.defaultTemplate); {
	case path != "":
		s, ok := r.files[path]
		if !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, nil, fmt.Errorf("reading template: %w", err)
			}
			s = string(b)
			r.files[path] = s
		}
		src, name = s, path
	case mi != nil:
		if mi.tmplsErr != nil {
			return nil, nil, mi.tmplsErr
		}
		s, err := mi.tmpls.Select(req.TemplateName, req.Tools != nil)
		if err != nil {
			return nil, nil, err
		}
		src, name = s, mi.tmpls.Origin
	default:
		return nil, nil, fmt.Errorf("%w: the request names no template and no model folder (use \"template\", \"model\", --template or --model)", templates.ErrNoTemplate)
	}
	if err, ok := r.compileErr[src]; ok {
		return nil, nil, err
	}
	tpl, ok := r.compiled[src]
	if !ok {
		var err error
		tpl, err = templates.Compile(src, templates.WithName(name))
		if err != nil {
			r.compileErr[src] = err
			return nil, nil, err
		}
		r.compiled[src] = tpl
	}
	return tpl, special, nil
}

// model reads a model folder's templates and special tokens once.
func (r *renderCLI) model(dir string) *modelInfo {
	if mi, ok := r.models[dir]; ok {
		return mi
	}
	mi := &modelInfo{}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a folder", dir)
		}
		mi.tmplsErr = fmt.Errorf("model folder: %w", err)
		mi.specErr = mi.tmplsErr
	} else {
		mi.tmpls, mi.tmplsErr = templates.LoadModelTemplates(dir)
		mi.special, mi.specErr = templates.LoadSpecialTokens(dir)
	}
	r.models[dir] = mi
	return mi
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

// parseRenderRequest decodes one input line, keeping key order and the
// int/float distinction (templates.DecodeJSON), as Python's json.loads.
func parseRenderRequest(line []byte) (*renderRequest, error) {
	v, err := templates.DecodeJSON(line)
	if err != nil {
		return nil, err
	}
	obj, ok := v.(*templates.Dict)
	if !ok {
		return nil, errors.New("a request line must be a JSON object")
	}
	req := &renderRequest{}
	var ferr error
	str := func(key string, dst *string) {
		v, ok := obj.Get(key)
		if !ok || v == nil {
			return
		}
		s, isStr := v.(string)
		if !isStr {
			ferr = fmt.Errorf("%q must be a string or null", key)
			return
		}
		*dst = s
	}
	dict := func(key string) (*templates.Dict, bool) {
		v, ok := obj.Get(key)
		if !ok || v == nil {
			return nil, false
		}
		d, isDict := v.(*templates.Dict)
		if !isDict {
			ferr = fmt.Errorf("%q must be an object or null", key)
		}
		return d, isDict
	}
	str("template", &req.Template)
	str("model", &req.Model)
	str("template_name", &req.TemplateName)
	if v, ok := obj.Get("messages"); ok && v != nil {
		msgs, isList := v.([]any)
		if !isList {
			return nil, errors.New(`"messages" must be a list`)
		}
		req.Messages = msgs
	}
	req.Tools, _ = obj.Get("tools")
	req.Documents, _ = obj.Get("documents")
	if v, ok := obj.Get("add_generation_prompt"); ok && v != nil {
		b, isBool := v.(bool)
		if !isBool {
			return nil, errors.New(`"add_generation_prompt" must be a boolean`)
		}
		req.AddGenerationPrompt = b
	}
	req.SpecialTokens, req.HasSpecialTokens = dict("special_tokens")
	req.Kwargs, _ = dict("kwargs")
	var now string
	str("now", &now)
	if ferr != nil {
		return nil, ferr
	}
	if now != "" {
		t, err := parseNaiveTime(now)
		if err != nil {
			return nil, err
		}
		req.Now = t
	}
	return req, nil
}

// parseNaiveTime reads an ISO 8601 date-time as Python's
// datetime.fromisoformat would, as a naive local time.
func parseNaiveTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		// keep the wall clock it names, as a naive datetime would
		return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.Local), nil
	}
	return time.Time{}, fmt.Errorf("\"now\" %q is not an ISO 8601 date-time", s)
}
