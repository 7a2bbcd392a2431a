package templates

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// missingT marks an argument that was not passed.
type missingT struct{}

func isMissing(v any) bool { _, ok := v.(missingT); return ok }

// argv holds bound builtin arguments; no builtin takes more than six.
type argv [6]any

// bindArgs binds a builtin call's positional and keyword arguments to
// params as Python does; the first required params must be given, the
// rest are missingT{} when absent. It returns an array, not a slice, so
// that binding allocates nothing.
func bindArgs(fname string, args []any, kw []kwarg, params []string, required int) (out argv) {
	if len(args) > len(params) {
		typeError("%s() takes at most %d argument%s (%d given)", fname, len(params), plural(len(params)), len(args))
	}
	for i := range params {
		if i < len(args) {
			out[i] = args[i]
		} else {
			out[i] = missingT{}
		}
	}
	for _, k := range kw {
		found := false
		for i, p := range params {
			if p == k.name {
				if i < len(args) {
					typeError("%s() got multiple values for argument '%s'", fname, k.name)
				}
				out[i] = k.val
				found = true
				break
			}
		}
		if !found {
			typeError("%s() got an unexpected keyword argument '%s'", fname, k.name)
		}
	}
	for i := 0; i < required; i++ {
		if isMissing(out[i]) {
			typeError("%s() missing required argument '%s' (pos %d)", fname, params[i], i+1)
		}
	}
	return out
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func argOr(v, def any) any {
	if isMissing(v) {
		return def
	}
	return v
}

func wantStr(fname string, v any) string {
	s, ok := v.(string)
	if !ok {
		typeError("%s() argument must be str, not %s", fname, typeName(v))
	}
	return s
}

func wantInt(fname string, v any) int {
	n, ok := asInt64(v)
	if !ok {
		typeError("'%s' object cannot be interpreted as an integer", typeName(v))
	}
	return int(n)
}

func strMethod(name string) methodFn {
	switch name {
	case "strip", "lstrip", "rstrip":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"chars"}, 0)
			s := recv.(string)
			chars := argOr(a[0], nil)
			if chars == nil {
				switch name {
				case "strip":
					return rstripSpace(lstripSpace(s))
				case "lstrip":
					return lstripSpace(s)
				}
				return rstripSpace(s)
			}
			cs, ok := chars.(string)
			if !ok {
				typeError("%s arg must be None or str", name)
			}
			cut := func(r rune) bool { return strings.ContainsRune(cs, r) }
			switch name {
			case "strip":
				return strings.TrimFunc(s, cut)
			case "lstrip":
				return strings.TrimLeftFunc(s, cut)
			}
			return strings.TrimRightFunc(s, cut)
		}
	case "split", "rsplit":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"sep", "maxsplit"}, 0)
			sep := argOr(a[0], nil)
			maxsplit := -1
			if !isMissing(a[1]) {
				maxsplit = wantInt(name, a[1])
			}
			s := recv.(string)
			var parts []string
			if sep == nil {
				parts = splitWhitespace(s, maxsplit, name == "rsplit")
			} else {
				ss, ok := sep.(string)
				if !ok {
					typeError("must be str or None, not %s", typeName(sep))
				}
				if ss == "" {
					throw(excValue, "empty separator")
				}
				if name == "rsplit" {
					parts = rsplitN(s, ss, maxsplit)
				} else if maxsplit < 0 {
					parts = strings.Split(s, ss)
				} else {
					parts = strings.SplitN(s, ss, maxsplit+1)
				}
			}
			out := make([]any, len(parts))
			for i, p := range parts {
				out[i] = p
			}
			return out
		}
	case "splitlines":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"keepends"}, 0)
			lines := splitLines(recv.(string), truthy(argOr(a[0], false)))
			out := make([]any, len(lines))
			for i, l := range lines {
				out[i] = l
			}
			return out
		}
	case "replace":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"old", "new", "count"}, 2)
			n := -1
			if !isMissing(a[2]) {
				n = wantInt(name, a[2])
			}
			return strings.Replace(recv.(string), wantStr(name, a[0]), wantStr(name, a[1]), n)
		}
	case "startswith", "endswith":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"prefix", "start", "end"}, 1)
			s := strRange(recv.(string), a[1], a[2])
			test := strings.HasPrefix
			if name == "endswith" {
				test = strings.HasSuffix
			}
			switch p := a[0].(type) {
			case string:
				return test(s, p)
			case tuple:
				for _, e := range p {
					es, ok := e.(string)
					if !ok {
						typeError("tuple for %s must only contain str, not %s", name, typeName(e))
					}
					if test(s, es) {
						return true
					}
				}
				return false
			}
			typeError("%s first arg must be str or a tuple of str, not %s", name, typeName(a[0]))
			return nil
		}
	case "upper":
		return noArgStr(name, strings.ToUpper)
	case "lower", "casefold":
		return noArgStr(name, strings.ToLower)
	case "title":
		return noArgStr(name, pyTitle)
	case "capitalize":
		return noArgStr(name, pyCapitalize)
	case "swapcase":
		return noArgStr(name, func(s string) string {
			return strings.Map(func(r rune) rune {
				switch {
				case unicode.IsUpper(r):
					return unicode.ToLower(r)
				case unicode.IsLower(r):
					return unicode.ToUpper(r)
				}
				return r
			}, s)
		})
	case "find", "rfind", "index", "rindex", "count":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"sub", "start", "end"}, 1)
			s := recv.(string)
			sub := wantStr(name, a[0])
			hay, off := strRangeOff(s, a[1], a[2])
			if name == "count" {
				if sub == "" {
					return int64(runeLen(hay) + 1)
				}
				return int64(strings.Count(hay, sub))
			}
			var i int
			if name == "find" || name == "index" {
				i = strings.Index(hay, sub)
			} else {
				i = strings.LastIndex(hay, sub)
			}
			if i < 0 {
				if name == "index" || name == "rindex" {
					throw(excValue, "substring not found")
				}
				return int64(-1)
			}
			return int64(off + runeLen(hay[:i]))
		}
	case "join":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"iterable"}, 1)
			items := r.iterate(a[0])
			parts := make([]string, len(items))
			for i, it := range items {
				s, ok := it.(string)
				if !ok {
					typeError("sequence item %d: expected str instance, %s found", i, typeName(it))
				}
				parts[i] = s
			}
			return strings.Join(parts, recv.(string))
		}
	case "isdigit", "isdecimal", "isnumeric":
		return strPredicate(name, func(r rune) bool { return unicode.IsDigit(r) || name == "isnumeric" && unicode.IsNumber(r) })
	case "isalpha":
		return strPredicate(name, unicode.IsLetter)
	case "isalnum":
		return strPredicate(name, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) })
	case "isspace":
		return strPredicate(name, pyIsSpace)
	case "isascii":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return isASCII(recv.(string))
		}
	case "islower", "isupper":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			cased := false
			for _, c := range recv.(string) {
				if unicode.IsUpper(c) || unicode.IsTitle(c) {
					if name == "islower" {
						return false
					}
					cased = true
				} else if unicode.IsLower(c) {
					if name == "isupper" {
						return false
					}
					cased = true
				}
			}
			return cased
		}
	case "istitle":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			s := recv.(string)
			return s != "" && pyTitle(s) == s && strings.ToLower(s) != s
		}
	case "center", "ljust", "rjust":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"width", "fillchar"}, 1)
			fill := " "
			if !isMissing(a[1]) {
				fill = wantStr(name, a[1])
				if runeLen(fill) != 1 {
					typeError("The fill character must be exactly one character long")
				}
			}
			return pad(recv.(string), wantInt(name, a[0]), fill, name)
		}
	case "zfill":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"width"}, 1)
			s := recv.(string)
			w := wantInt(name, a[0])
			n := runeLen(s)
			if n >= w {
				return s
			}
			sign := ""
			if s != "" && (s[0] == '+' || s[0] == '-') {
				sign, s = s[:1], s[1:]
			}
			return sign + repeatStr("0", w-n) + s
		}
	case "partition", "rpartition":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"sep"}, 1)
			s, sep := recv.(string), wantStr(name, a[0])
			if sep == "" {
				throw(excValue, "empty separator")
			}
			var i int
			if name == "partition" {
				i = strings.Index(s, sep)
				if i < 0 {
					return tuple{s, "", ""}
				}
			} else {
				i = strings.LastIndex(s, sep)
				if i < 0 {
					return tuple{"", "", s}
				}
			}
			return tuple{s[:i], sep, s[i+len(sep):]}
		}
	case "removeprefix", "removesuffix":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"affix"}, 1)
			if name == "removeprefix" {
				return strings.TrimPrefix(recv.(string), wantStr(name, a[0]))
			}
			return strings.TrimSuffix(recv.(string), wantStr(name, a[0]))
		}
	case "expandtabs":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"tabsize"}, 0)
			ts := 8
			if !isMissing(a[0]) {
				ts = wantInt(name, a[0])
			}
			var b strings.Builder
			col := 0
			for _, c := range recv.(string) {
				switch c {
				case '\t':
					if ts > 0 {
						n := ts - col%ts
						b.WriteString(repeatStr(" ", n))
						col += n
					}
				case '\n', '\r':
					b.WriteRune(c)
					col = 0
				default:
					b.WriteRune(c)
					col++
				}
			}
			return b.String()
		}
	case "format":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			return r.strFormat(recv.(string), args, kw)
		}
	case "format_map":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			a := bindArgs(name, args, kw, []string{"mapping"}, 1)
			d, ok := a[0].(*Dict)
			if !ok {
				typeError("format_map() argument must be a mapping, not %s", typeName(a[0]))
			}
			var kws []kwarg
			for i, k := range d.keys {
				if ks, ok := k.(string); ok {
					kws = append(kws, kwarg{ks, d.vals[i]})
				}
			}
			return r.strFormat(recv.(string), nil, kws)
		}
	}
	return nil
}

func noArgStr(name string, fn func(string) string) methodFn {
	return func(r *renderer, recv any, args []any, kw []kwarg) any {
		bindArgs(name, args, kw, nil, 0)
		return fn(recv.(string))
	}
}

func strPredicate(name string, ok func(rune) bool) methodFn {
	return func(r *renderer, recv any, args []any, kw []kwarg) any {
		bindArgs(name, args, kw, nil, 0)
		s := recv.(string)
		if s == "" {
			return false
		}
		for _, c := range s {
			if !ok(c) {
				return false
			}
		}
		return true
	}
}

// strRange is s[start:end] for the optional start/end of str methods.
func strRange(s string, start, end any) string {
	hay, _ := strRangeOff(s, start, end)
	return hay
}

// strRangeOff is strRange plus the rune offset of the result in s.
func strRangeOff(s string, start, end any) (string, int) {
	if isMissing(start) && isMissing(end) {
		return s, 0
	}
	lo, _ := sliceIndex(argOr(start, nil))
	hi, _ := sliceIndex(argOr(end, nil))
	rs := []rune(s)
	a, b := sliceBounds(len(rs), lo, hi, isMissing(start) || start == nil, isMissing(end) || end == nil)
	return string(rs[a:b]), a
}

func pad(s string, width int, fill, how string) string {
	n := runeLen(s)
	if n >= width {
		return s
	}
	total := width - n
	var left int
	switch how {
	case "ljust":
		left = 0
	case "rjust":
		left = total
	default:
		// CPython: left = pad/2 + (pad & width & 1)
		left = total/2 + (total & width & 1)
	}
	return repeatStr(fill, left) + s + repeatStr(fill, total-left)
}

// splitWhitespace is str.split() / str.rsplit() without a separator.
func splitWhitespace(s string, maxsplit int, fromRight bool) []string {
	if !fromRight {
		var out []string
		i := skipSpace(s, 0)
		for i < len(s) {
			if maxsplit >= 0 && len(out) == maxsplit {
				out = append(out, s[i:])
				return out
			}
			j := i
			for j < len(s) {
				r, size := utf8.DecodeRuneInString(s[j:])
				if pyIsSpace(r) {
					break
				}
				j += size
			}
			out = append(out, s[i:j])
			i = skipSpace(s, j)
		}
		return out
	}
	var rev []string
	j := len(rstripSpace(s))
	for j > 0 {
		if maxsplit >= 0 && len(rev) == maxsplit {
			rev = append(rev, s[:j])
			break
		}
		i := j
		for i > 0 {
			r, size := utf8.DecodeLastRuneInString(s[:i])
			if pyIsSpace(r) {
				break
			}
			i -= size
		}
		rev = append(rev, s[i:j])
		j = len(rstripSpace(s[:i]))
	}
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

func rsplitN(s, sep string, maxsplit int) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	rev = append(rev, s)
	out := make([]string, len(rev))
	for i, p := range rev {
		out[len(rev)-1-i] = p
	}
	return out
}

// splitLines is str.splitlines.
func splitLines(s string, keepEnds bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		eol := 0
		switch r {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			eol = size
		case '\r':
			eol = 1
			if i+1 < len(s) && s[i+1] == '\n' {
				eol = 2
			}
		}
		if eol == 0 {
			i += size
			continue
		}
		if keepEnds {
			out = append(out, s[start:i+eol])
		} else {
			out = append(out, s[start:i])
		}
		i += eol
		start = i
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func isCased(r rune) bool { return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) }

// pyTitle is Python's str.title.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// pyCapitalize is Python's str.capitalize.
func pyCapitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	if size == 0 {
		return s
	}
	return string(unicode.ToTitle(r)) + strings.ToLower(s[size:])
}

func listMethod(name string) methodFn {
	switch name {
	case "copy":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return append([]any{}, recv.([]any)...)
		}
	case "count", "index":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			return seqCountIndex(name, recv.([]any), args, kw)
		}
	}
	return nil
}

func tupleMethod(name string) methodFn {
	switch name {
	case "count", "index":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			return seqCountIndex(name, recv.(tuple), args, kw)
		}
	}
	return nil
}

func seqCountIndex(name string, items []any, args []any, kw []kwarg) any {
	a := bindArgs(name, args, kw, []string{"value"}, 1)
	n := 0
	for i, it := range items {
		if pyEqual(it, a[0]) {
			if name == "index" {
				return int64(i)
			}
			n++
		}
	}
	if name == "index" {
		throw(excValue, "%s is not in list", repr(a[0]))
	}
	return int64(n)
}

func dictMethod(name string) methodFn {
	switch name {
	case "items":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return &dictView{d: recv.(*Dict), kind: 'i'}
		}
	case "keys":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return &dictView{d: recv.(*Dict), kind: 'k'}
		}
	case "values":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return &dictView{d: recv.(*Dict), kind: 'v'}
		}
	case "get":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			if len(kw) > 0 {
				typeError("get() takes no keyword arguments")
			}
			if len(args) < 1 {
				typeError("get expected at least 1 argument, got %d", len(args))
			}
			if len(args) > 2 {
				typeError("get expected at most 2 arguments, got %d", len(args))
			}
			if v, ok := recv.(*Dict).getAny(args[0]); ok {
				return v
			}
			mustHash(args[0])
			if len(args) == 2 {
				return args[1]
			}
			return nil
		}
	case "copy":
		return func(r *renderer, recv any, args []any, kw []kwarg) any {
			bindArgs(name, args, kw, nil, 0)
			return recv.(*Dict).copyDict()
		}
	}
	return nil
}

func dictItems(d *Dict) []any {
	if d == nil {
		return []any{}
	}
	out := make([]any, d.Len())
	for i, k := range d.keys {
		out[i] = tuple{k, d.vals[i]}
	}
	return out
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
