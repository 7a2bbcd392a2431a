// Command gonjaparity measures how many fixture cases
// (../shared/fixtures/templates/cases.jsonl) github.com/nikolalohinski/gonja/v2
// renders exactly as transformers does, in two configurations:
//
//   - stock: gonja's default environment with transformers' settings
//     (trim_blocks, lstrip_blocks, no trailing newline) and the two globals
//     transformers adds (raise_exception, strftime_now); request JSON
//     decoded with encoding/json, as a Go program would by default.
//   - extended: as far as gonja's public extension points reach: request
//     JSON decoded into insertion-ordered exec.Dict values with ints kept
//     apart from floats, a Python json.dumps-compatible tojson filter, and
//     dict methods (items, keys, values, get) that keep key order.
//
// A case passes when gonja produces the expected string, or fails (any
// error) where jinja2 raises. It is a separate module so that gonja stays
// out of troupe's go.mod; run it with
//
//	cd templates/gonjaparity && GOWORK=off go run . [FIXTURES_DIR]
//
// The numbers it prints are recorded in templates/DESIGN.md.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

var now = time.Date(2025, 1, 15, 10, 30, 0, 0, time.Local)

type fixtureCase struct {
	ID       string `json:"id"`
	Template string `json:"template"`
	Inputs   struct {
		Messages            json.RawMessage `json:"messages"`
		Tools               json.RawMessage `json:"tools"`
		Documents           json.RawMessage `json:"documents"`
		AddGenerationPrompt bool            `json:"add_generation_prompt"`
		SpecialTokens       json.RawMessage `json:"special_tokens"`
		Kwargs              json.RawMessage `json:"kwargs"`
	} `json:"inputs"`
	Expected      *string         `json:"expected"`
	ExpectedError json.RawMessage `json:"expected_error"`
}

func main() {
	gonja.SetLoggerOutput(io.Discard)
	dir := filepath.Join("..", "..", "..", "shared", "fixtures")
	if v := os.Getenv("TROUPE_FIXTURES"); v != "" {
		dir = v
	}
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	tdir := filepath.Join(dir, "templates")
	cases, err := readCases(filepath.Join(tdir, "cases.jsonl"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, mode := range []string{"stock", "extended"} {
		pass := map[string]int{}
		total := map[string]int{}
		compileErr := map[string]string{}
		compiled := map[string]*exec.Template{}
		for _, c := range cases {
			total[c.Template]++
			tpl, ok := compiled[c.Template]
			if !ok {
				src, err := os.ReadFile(filepath.Join(tdir, "templates", c.Template+".jinja"))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				tpl, err = compile(string(src), mode == "extended")
				if err != nil {
					compileErr[c.Template] = firstLine(err.Error())
				}
				compiled[c.Template] = tpl
			}
			if tpl == nil {
				continue
			}
			out, err := render(tpl, c, mode == "extended")
			switch {
			case c.Expected != nil && err == nil && out == *c.Expected:
				pass[c.Template]++
			case c.Expected == nil && err != nil:
				pass[c.Template]++
			default:
				if os.Getenv("GONJAPARITY_VERBOSE") != "" && mode == "extended" {
					why := "rendered, but jinja2 raises " + string(c.ExpectedError)
					if err != nil {
						why = "error: " + firstLine(err.Error())
					} else if c.Expected != nil {
						why = "differs: " + firstDiff(*c.Expected, out)
					}
					fmt.Printf("    %s: %s\n", c.ID, why)
				}
			}
		}
		names := make([]string, 0, len(total))
		for n := range total {
			names = append(names, n)
		}
		sort.Strings(names)
		sum, all, full := 0, 0, 0
		fmt.Printf("gonja v2.9.1, %s configuration\n", mode)
		for _, n := range names {
			note := ""
			if e, ok := compileErr[n]; ok {
				note = "  (does not compile: " + e + ")"
			}
			fmt.Printf("  %-26s %3d/%3d%s\n", n, pass[n], total[n], note)
			sum += pass[n]
			all += total[n]
			if pass[n] == total[n] {
				full++
			}
		}
		fmt.Printf("  total %d/%d cases (%.1f%%), %d/%d templates at 100%%\n\n", sum, all, 100*float64(sum)/float64(all), full, len(names))
	}
}

func firstDiff(want, got string) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	lo := max(0, i-30)
	return fmt.Sprintf("want %q got %q", want[lo:min(len(want), i+40)], got[lo:min(len(got), i+40)])
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 90 {
		s = s[:90] + "..."
	}
	return s
}

func readCases(path string) ([]fixtureCase, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []fixtureCase
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var c fixtureCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, sc.Err()
}

func environment(extended bool) *exec.Environment {
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("raise_exception", func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		return "", errors.New(params.First().String())
	})
	ctx.Set("strftime_now", func(_ *exec.Evaluator, params *exec.VarArgs) (string, error) {
		return strftime(params.First().String()), nil
	})
	env := &exec.Environment{
		Context:           ctx,
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	if extended {
		filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
		filters.Update(builtins.Filters)
		_ = filters.Replace("tojson", pyToJSON)
		_ = filters.Replace("items", func(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
			var out [][]any
			for _, p := range pairs(in) {
				out = append(out, []any{p.Key.Interface(), p.Value.Interface()})
			}
			return exec.AsValue(out)
		})
		env.Filters = filters
		env.Methods = exec.Methods{
			Bool:  builtins.Methods.Bool,
			Int:   builtins.Methods.Int,
			Float: builtins.Methods.Float,
			Str:   strMethods(),
			List:  builtins.Methods.List,
			Dict: exec.NewMethodSet(map[string]exec.Method[map[string]any]{
				"items": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
					var out [][]any
					for _, p := range pairs(self) {
						out = append(out, []any{p.Key.Interface(), p.Value.Interface()})
					}
					return out, nil
				},
				"keys": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
					var out []any
					for _, p := range pairs(self) {
						out = append(out, p.Key.Interface())
					}
					return out, nil
				},
				"values": func(_ map[string]any, self *exec.Value, _ *exec.VarArgs) (any, error) {
					var out []any
					for _, p := range pairs(self) {
						out = append(out, p.Value.Interface())
					}
					return out, nil
				},
				"get": func(_ map[string]any, self *exec.Value, args *exec.VarArgs) (any, error) {
					key := args.First().String()
					for _, p := range pairs(self) {
						if p.Key.String() == key {
							return p.Value.Interface(), nil
						}
					}
					if len(args.Args) > 1 {
						return args.Args[1].Interface(), nil
					}
					return nil, nil
				},
			}),
		}
	}
	return env
}

// strMethods is gonja's str method set with Python's split(sep, maxsplit).
func strMethods() *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range []string{"capitalize", "casefold", "center", "count", "endswith", "find", "format", "isalnum", "isalpha", "isdigit", "islower", "isspace", "isupper", "join", "ljust", "lower", "lstrip", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rjust", "rpartition", "rsplit", "rstrip", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill"} {
		if fn, ok := builtins.Methods.Str.Get(name); ok {
			m[name] = fn
		}
	}
	m["split"] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
		n := -1
		if len(args.Args) > 1 {
			n = args.Args[1].Integer() + 1
		}
		var parts []string
		if len(args.Args) == 0 || args.Args[0].IsNil() {
			parts = strings.Fields(self)
		} else {
			parts = strings.SplitN(self, args.Args[0].String(), n)
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
	return exec.NewMethodSet(m)
}

func pairs(v *exec.Value) []*exec.Pair {
	if d, ok := v.Interface().(exec.Dict); ok {
		return d.Pairs
	}
	return v.Items()
}

func compile(src string, extended bool) (tpl *exec.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tpl, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	shifted, err := loaders.NewShiftedLoader("chat", strings.NewReader(src), loader)
	if err != nil {
		return nil, err
	}
	return exec.NewTemplate("chat", cfg, shifted, environment(extended))
}

func render(tpl *exec.Template, c fixtureCase, extended bool) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("panic: %v", r)
		}
	}()
	decode := decodeStock
	if extended {
		decode = decodeOrdered
	}
	data := map[string]any{}
	for _, kv := range []struct {
		name string
		raw  json.RawMessage
	}{{"messages", c.Inputs.Messages}, {"tools", c.Inputs.Tools}, {"documents", c.Inputs.Documents}} {
		v, err := decode(kv.raw)
		if err != nil {
			return "", err
		}
		data[kv.name] = v
	}
	data["add_generation_prompt"] = c.Inputs.AddGenerationPrompt
	for _, raw := range []json.RawMessage{c.Inputs.SpecialTokens, c.Inputs.Kwargs} {
		var m map[string]json.RawMessage
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &m); err != nil {
				return "", err
			}
		}
		for k, r := range m {
			v, err := decode(r)
			if err != nil {
				return "", err
			}
			data[k] = v
		}
	}
	return tpl.ExecuteToString(exec.NewContext(data))
}

func decodeStock(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err
}

// decodeOrdered decodes JSON into exec.Dict (ordered) objects, int64 for
// integers and float64 for other numbers.
func decodeOrdered(raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return decodeValue(dec)
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := exec.Dict{Pairs: []*exec.Pair{}}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(k.(string)), Value: exec.AsValue(v)})
			}
			_, err := dec.Token()
			return d, err
		case '[':
			l := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				l = append(l, v)
			}
			_, err := dec.Token()
			return l, err
		}
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return strconv.ParseFloat(string(t), 64)
		}
		return strconv.ParseInt(string(t), 10, 64)
	}
	return tok, nil
}

// pyToJSON is transformers' tojson (json.dumps, ensure_ascii=False,
// insertion order) as a gonja filter.
func pyToJSON(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && v.IsInteger() {
		indent = v.Integer()
	}
	var b strings.Builder
	if err := writeJSON(&b, in.Interface(), indent, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsValue(b.String())
}

func writeJSON(b *strings.Builder, v any, indent, level int) error {
	itemSep, nl := ", ", ""
	if indent >= 0 {
		itemSep = ","
	}
	newline := func(l int) {
		if indent >= 0 {
			b.WriteString("\n" + strings.Repeat(" ", indent*l))
		}
	}
	switch x := v.(type) {
	case *exec.Value:
		return writeJSON(b, x.Interface(), indent, level)
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") && !math.IsInf(x, 0) && !math.IsNaN(x) {
			s += ".0"
		}
		b.WriteString(s)
	case string:
		enc, _ := json.Marshal(x)
		s := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\u2028`, "\u2028", `\u2029`, "\u2029").Replace(string(enc))
		b.WriteString(s)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(level + 1)
			if err := writeJSON(b, e, indent, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte(']')
	case exec.Dict:
		if len(x.Pairs) == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		for i, p := range x.Pairs {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(level + 1)
			if err := writeJSON(b, p.Key.String(), indent, level+1); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writeJSON(b, p.Value, indent, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("Object of type %T is not JSON serializable%s", v, nl)
	}
	return nil
}

func strftime(format string) string {
	r := strings.NewReplacer("%Y", now.Format("2006"), "%m", now.Format("01"), "%d", now.Format("02"),
		"%b", now.Format("Jan"), "%B", now.Format("January"))
	return r.Replace(format)
}
