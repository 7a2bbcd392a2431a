package templates

import (
	"fmt"
	"strings"
)

// parser builds the statement tree from tokens, following jinja2's parser
// (jinja2/parser.py) production by production, so that precedence and the
// corner cases (filters binding tighter than operators, tests binding
// tighter than "not", conditional expressions in parentheses, implicit
// tuples) come out the same.
type parser struct {
	toks      []token
	pos       int
	name      string
	loopDepth int
	soft      bool // inside an if: unknown filters/tests fail at run time
	// refs collects names loaded inside the macro bodies being parsed, to
	// find the macros that use varargs, kwargs or caller.
	refs []map[string]bool
	// depth is the nesting of expressions and blocks being parsed, bounded
	// so that a pathological template cannot exhaust the stack.
	depth int
}

const maxParseDepth = 500

func (p *parser) enter() {
	p.depth++
	if p.depth > maxParseDepth {
		p.fail(p.cur().line, "template nested too deeply (more than %d levels)", maxParseDepth)
	}
}

type parseError struct{ err *Error }

func (p *parser) fail(line int, format string, args ...any) {
	panic(parseError{syntaxError(p.name, line, format, args...)})
}

func parse(name string, toks []token) (body []node, err error) {
	p := &parser{toks: toks, name: name}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(parseError)
			if !ok {
				panic(r)
			}
			body, err = nil, pe.err
		}
	}()
	body = p.subparse(nil)
	if p.cur().typ != tokEOF {
		p.fail(p.cur().line, "unexpected %s", p.cur().describe())
	}
	return body, nil
}

func (p *parser) cur() token  { return p.toks[p.pos] }
func (p *parser) peek() token { return p.toks[min(p.pos+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}

func (p *parser) isName(v string) bool { t := p.cur(); return t.typ == tokName && t.val == v }
func (p *parser) isOp(v string) bool   { t := p.cur(); return t.typ == tokOp && t.val == v }

func (p *parser) skipName(v string) bool {
	if p.isName(v) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipOp(v string) bool {
	if p.isOp(v) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(v string) token {
	if !p.isOp(v) {
		p.fail(p.cur().line, "expected token '%s', got '%s'", v, p.cur().describe())
	}
	return p.next()
}

func (p *parser) expectName(v string) token {
	if !p.isName(v) {
		p.fail(p.cur().line, "expected token 'name:%s', got '%s'", v, p.cur().describe())
	}
	return p.next()
}

func (p *parser) expectType(typ tokType, what string) token {
	if p.cur().typ != typ {
		p.fail(p.cur().line, "expected token '%s', got '%s'", what, p.cur().describe())
	}
	return p.next()
}

func (p *parser) expectIdent() token { return p.expectType(tokName, "name") }

// subparse parses nodes until a block tag whose name is one of ends (the
// block_begin is consumed; the stream is left on the end name) or, with
// no ends, until the end of the template.
func (p *parser) subparse(ends []string) []node {
	var body []node
	for {
		t := p.cur()
		switch t.typ {
		case tokEOF:
			if ends != nil {
				p.fail(t.line, "Unexpected end of template. Jinja was looking for the following tags: %s. The innermost block that needs to be closed is '%s'.", quoteTags(ends), blockNameFor(ends))
			}
			return body
		case tokData:
			p.next()
			body = append(body, &textNode{s: t.val})
		case tokVarBegin:
			p.next()
			e := p.parseTuple(true, false, nil, false)
			p.expectType(tokVarEnd, "end of print statement")
			body = append(body, &outputNode{e: e, line: t.line})
		case tokBlockBegin:
			p.next()
			c := p.cur()
			if c.typ == tokName {
				for _, e := range ends {
					if c.val == e {
						return body
					}
				}
			}
			body = append(body, p.parseStatement())
			p.expectType(tokBlockEnd, "end of statement block")
		default:
			p.fail(t.line, "unexpected %s", t.describe())
		}
	}
}

func quoteTags(ends []string) string {
	q := make([]string, len(ends))
	for i, e := range ends {
		q[i] = "'" + e + "'"
	}
	return strings.Join(q, " or ")
}

func blockNameFor(ends []string) string {
	for _, e := range ends {
		if strings.HasPrefix(e, "end") {
			return strings.TrimPrefix(e, "end")
		}
	}
	return ends[0]
}

// parseStatements expects the end of the opening tag, then parses the body
// up to one of ends; with drop, it also consumes the end name.
func (p *parser) parseStatements(ends []string, drop bool) []node {
	p.skipOp(":")
	p.expectType(tokBlockEnd, "end of statement block")
	body := p.subparse(ends)
	if drop {
		p.next()
	}
	return body
}

func (p *parser) parseStatement() node {
	p.enter()
	defer func() { p.depth-- }()
	t := p.cur()
	if t.typ != tokName {
		p.fail(t.line, "tag name expected")
	}
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "block":
		return p.parseBlock()
	case "autoescape":
		p.next()
		p.parseExpression(true)
		return &scopeNode{body: p.parseStatements([]string{"endautoescape"}, true), line: t.line}
	case "generation":
		// transformers' AssistantTracker extension: the body renders as is.
		p.next()
		return &scopeNode{body: p.parseStatements([]string{"endgeneration"}, true), line: t.line}
	case "break", "continue":
		p.next()
		if p.loopDepth == 0 {
			// jinja2 emits the statement into Python code, whose compiler
			// rejects it.
			panic(parseError{&Error{Type: "SyntaxError", Message: fmt.Sprintf("'%s' outside loop", t.val), Name: p.name, Line: t.line}})
		}
		if t.val == "break" {
			return &breakNode{line: t.line}
		}
		return &continueNode{line: t.line}
	case "include", "import", "from", "extends":
		return p.parseLoaderStatement()
	}
	p.fail(t.line, "Encountered unknown tag '%s'.", t.val)
	return nil
}

func (p *parser) parseIf() node {
	line := p.next().line
	n := &ifNode{line: line}
	saved := p.soft
	p.soft = true
	defer func() { p.soft = saved }()
	for {
		n.conds = append(n.conds, p.parseTuple(false, false, nil, false))
		n.bodies = append(n.bodies, p.parseStatements([]string{"elif", "else", "endif"}, false))
		t := p.next()
		switch t.val {
		case "elif":
			continue
		case "else":
			n.els = p.parseStatements([]string{"endif"}, true)
		}
		return n
	}
}

func (p *parser) parseFor() node {
	line := p.next().line
	tgt := p.parseAssignTarget(true, false, []string{"in"}, false)
	p.expectName("in")
	iter := p.parseTuple(false, false, []string{"recursive"}, false)
	var cond expr
	if p.skipName("if") {
		cond = p.parseExpression(true)
	}
	recursive := p.skipName("recursive")
	savedSoft := p.soft
	p.soft = false
	p.loopDepth++
	body := p.parseStatements([]string{"endfor", "else"}, false)
	p.loopDepth--
	var els []node
	if p.next().val != "endfor" {
		els = p.parseStatements([]string{"endfor"}, true)
	}
	p.soft = savedSoft
	return &forNode{target: tgt, iter: iter, cond: cond, body: body, els: els, recursive: recursive, line: line}
}

func (p *parser) parseSet() node {
	line := p.next().line
	tgt := p.parseAssignTarget(true, false, nil, true)
	if p.skipOp("=") {
		return &setNode{target: tgt, e: p.parseTuple(true, false, nil, false), line: line}
	}
	var filters []*filterExpr
	for p.isOp("|") {
		p.next()
		filters = append(filters, p.parseFilterCall(nil))
	}
	savedSoft := p.soft
	p.soft = false
	body := p.parseStatements([]string{"endset"}, true)
	p.soft = savedSoft
	return &setBlockNode{target: tgt, body: body, filters: filters, line: line}
}

func (p *parser) parseMacro() node {
	line := p.next().line
	name := p.expectIdent().val
	def := &macroDef{name: name, line: line}
	p.parseSignature(def)
	p.parseMacroBody(def, "endmacro")
	return &macroNode{def: def}
}

func (p *parser) parseMacroBody(def *macroDef, end string) {
	savedLoop, savedSoft := p.loopDepth, p.soft
	p.loopDepth, p.soft = 0, false
	p.refs = append(p.refs, map[string]bool{})
	def.body = p.parseStatements([]string{end}, true)
	refs := p.refs[len(p.refs)-1]
	p.refs = p.refs[:len(p.refs)-1]
	p.loopDepth, p.soft = savedLoop, savedSoft
	def.catchVarargs = refs["varargs"]
	def.catchKwargs = refs["kwargs"]
	def.usesCaller = refs["caller"]
}

func (p *parser) parseSignature(def *macroDef) {
	p.expectOp("(")
	hasDefault := false
	for !p.isOp(")") {
		if len(def.params) > 0 {
			p.expectOp(",")
		}
		t := p.expectIdent()
		var d expr
		if p.skipOp("=") {
			d = p.parseExpression(true)
			hasDefault = true
		} else if hasDefault {
			p.fail(t.line, "non-default argument follows default argument")
		}
		def.params = append(def.params, t.val)
		def.defaults = append(def.defaults, d)
	}
	p.expectOp(")")
}

func (p *parser) parseCallBlock() node {
	line := p.next().line
	def := &macroDef{name: "caller", line: line}
	if p.isOp("(") {
		p.parseSignature(def)
	}
	call, ok := p.parseExpression(true).(*callExpr)
	if !ok {
		p.fail(line, "expected call")
	}
	p.parseMacroBody(def, "endcall")
	return &callBlockNode{call: call, caller: def, line: line}
}

func (p *parser) parseFilterBlock() node {
	line := p.next().line
	filters := []*filterExpr{p.parseFilterCall(nil)}
	for p.isOp("|") {
		p.next()
		filters = append(filters, p.parseFilterCall(nil))
	}
	savedSoft := p.soft
	p.soft = false
	body := p.parseStatements([]string{"endfilter"}, true)
	p.soft = savedSoft
	return &filterBlockNode{filters: filters, body: body, line: line}
}

func (p *parser) parseWith() node {
	line := p.next().line
	n := &withNode{line: line}
	for p.cur().typ != tokBlockEnd {
		if len(n.targets) > 0 {
			p.expectOp(",")
		}
		n.targets = append(n.targets, p.parseAssignTarget(true, false, nil, false))
		p.expectOp("=")
		n.values = append(n.values, p.parseExpression(true))
	}
	savedSoft := p.soft
	p.soft = false
	n.body = p.parseStatements([]string{"endwith"}, true)
	p.soft = savedSoft
	return n
}

func (p *parser) parseBlock() node {
	line := p.next().line
	name := p.expectIdent().val
	p.skipName("scoped")
	p.skipName("required")
	savedLoop := p.loopDepth
	p.loopDepth = 0
	body := p.parseStatements([]string{"endblock"}, true)
	p.loopDepth = savedLoop
	p.skipName(name)
	return &scopeNode{body: body, line: line}
}

// parseLoaderStatement parses include/import/from/extends. transformers'
// environment has no loader, so these raise TypeError when executed.
func (p *parser) parseLoaderStatement() node {
	t := p.next()
	p.parseExpression(true)
	switch t.val {
	case "include":
		if p.isName("ignore") && p.peek().typ == tokName && p.peek().val == "missing" {
			p.next()
			p.next()
		}
	case "import":
		p.expectName("as")
		p.expectIdent()
	case "from":
		p.expectName("import")
		for {
			p.expectIdent()
			if p.skipName("as") {
				p.expectIdent()
			}
			if !p.skipOp(",") {
				break
			}
		}
	}
	if (p.isName("with") || p.isName("without")) && p.peek().typ == tokName && p.peek().val == "context" {
		p.next()
		p.next()
	}
	return &unsupportedNode{typ: excType, msg: "no loader for this environment specified", line: t.line}
}

// parseAssignTarget parses a for/set/with target.
func (p *parser) parseAssignTarget(withTuple, nameOnly bool, extraEnd []string, withNamespace bool) target {
	if withNamespace && p.cur().typ == tokName && p.peek().typ == tokOp && p.peek().val == "." {
		name := p.next().val
		p.next()
		attr := p.expectIdent().val
		return target{name: name, attr: attr}
	}
	if nameOnly || !withTuple {
		return target{name: p.expectIdent().val}
	}
	return p.parseTargetTuple(extraEnd, false)
}

func (p *parser) parseTargetTuple(extraEnd []string, explicit bool) target {
	var items []target
	isTuple := false
	for {
		if len(items) > 0 {
			p.expectOp(",")
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		items = append(items, p.parseTargetPrimary())
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) == 1 {
			return items[0]
		}
		if !explicit {
			p.fail(p.cur().line, "Expected an expression, got '%s'", p.cur().describe())
		}
	}
	return target{items: items, tuple: true}
}

func (p *parser) parseTargetPrimary() target {
	t := p.cur()
	switch {
	case t.typ == tokName:
		switch t.val {
		case "true", "false", "True", "False", "none", "None":
			p.fail(t.line, "can't assign to 'const'")
		}
		p.next()
		return target{name: t.val}
	case t.typ == tokOp && t.val == "(":
		p.next()
		tg := p.parseTargetTuple(nil, true)
		p.expectOp(")")
		return tg
	}
	p.fail(t.line, "can't assign to '%s'", t.describe())
	return target{}
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	switch t.typ {
	case tokVarEnd, tokBlockEnd:
		return true
	case tokOp:
		return t.val == ")"
	case tokName:
		for _, e := range extraEnd {
			if t.val == e {
				return true
			}
		}
	}
	return false
}

// parseTuple is jinja2's parse_tuple: one expression, or an implicit tuple
// of comma-separated expressions.
func (p *parser) parseTuple(withCondexpr, simplified bool, extraEnd []string, explicitParens bool) expr {
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			p.expectOp(",")
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		switch {
		case simplified:
			items = append(items, p.parsePrimary())
		default:
			items = append(items, p.parseExpression(withCondexpr))
		}
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0]
		}
		if !explicitParens {
			p.fail(p.cur().line, "Expected an expression, got '%s'", p.cur().describe())
		}
	}
	return &tupleExpr{items: items}
}

func (p *parser) parseExpression(withCondexpr bool) expr {
	p.enter()
	defer func() { p.depth-- }()
	if withCondexpr {
		return p.parseCondexpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondexpr() expr {
	line := p.cur().line
	e1 := p.parseOr()
	for p.skipName("if") {
		e2 := p.parseOr()
		var e3 expr
		if p.skipName("else") {
			e3 = p.parseCondexpr()
		}
		e1 = &condExpr{test: e2, a: e1, b: e3, line: line}
		line = p.cur().line
	}
	return e1
}

func (p *parser) parseOr() expr {
	l := p.parseAnd()
	for p.skipName("or") {
		l = &orExpr{l: l, r: p.parseAnd()}
	}
	return l
}

func (p *parser) parseAnd() expr {
	l := p.parseNot()
	for p.skipName("and") {
		l = &andExpr{l: l, r: p.parseNot()}
	}
	return l
}

func (p *parser) parseNot() expr {
	p.enter()
	defer func() { p.depth-- }()
	if p.skipName("not") {
		return &notExpr{e: p.parseNot()}
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() expr {
	line := p.cur().line
	first := p.parseMath1()
	var ops []string
	var operands []expr
	for {
		t := p.cur()
		switch {
		case t.typ == tokOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			p.next()
			ops = append(ops, t.val)
		case p.isName("in"):
			p.next()
			ops = append(ops, "in")
		case p.isName("not") && p.peek().typ == tokName && p.peek().val == "in":
			p.next()
			p.next()
			ops = append(ops, "notin")
		default:
			if ops == nil {
				return first
			}
			return &compareExpr{first: first, ops: ops, operands: operands, line: line}
		}
		operands = append(operands, p.parseMath1())
	}
}

func (p *parser) parseMath1() expr {
	line := p.cur().line
	l := p.parseConcat()
	for {
		switch {
		case p.isOp("+"):
			p.next()
			r := p.parseConcat()
			if a, ok := l.(*addExpr); ok {
				a.operands = append(a.operands, r)
			} else {
				l = &addExpr{operands: []expr{l, r}, line: line}
			}
		case p.isOp("-"):
			p.next()
			l = &binExpr{op: "-", l: l, r: p.parseConcat(), line: line}
		default:
			return l
		}
	}
}

func (p *parser) parseConcat() expr {
	line := p.cur().line
	parts := []expr{p.parseMath2()}
	for p.skipOp("~") {
		parts = append(parts, p.parseMath2())
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return &concatExpr{parts: parts, line: line}
}

func (p *parser) parseMath2() expr {
	line := p.cur().line
	l := p.parsePow()
	for {
		t := p.cur()
		if t.typ == tokOp && (t.val == "*" || t.val == "/" || t.val == "//" || t.val == "%") {
			p.next()
			l = &binExpr{op: t.val, l: l, r: p.parsePow(), line: line}
			continue
		}
		return l
	}
}

func (p *parser) parsePow() expr {
	line := p.cur().line
	l := p.parseUnary(true)
	for p.skipOp("**") {
		l = &binExpr{op: "**", l: l, r: p.parseUnary(true), line: line}
	}
	return l
}

func (p *parser) parseUnary(withFilter bool) expr {
	p.enter()
	defer func() { p.depth-- }()
	t := p.cur()
	var e expr
	switch {
	case t.typ == tokOp && t.val == "-":
		p.next()
		e = &unaryExpr{op: '-', e: p.parseUnary(false), line: t.line}
	case t.typ == tokOp && t.val == "+":
		p.next()
		e = &unaryExpr{op: '+', e: p.parseUnary(false), line: t.line}
	default:
		e = p.parsePrimary()
	}
	e = p.parsePostfix(e)
	if withFilter {
		e = p.parseFilterExpr(e)
	}
	return e
}

func (p *parser) parsePrimary() expr {
	t := p.cur()
	switch t.typ {
	case tokName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{v: true}
		case "false", "False":
			return &constExpr{v: false}
		case "none", "None":
			return &constExpr{v: nil}
		}
		for _, r := range p.refs {
			r[t.val] = true
		}
		return &nameExpr{name: t.val, line: t.line, missing: undefinedName(t.val)}
	case tokString:
		p.next()
		s := t.val
		for p.cur().typ == tokString {
			s += p.next().val
		}
		return &constExpr{v: s}
	case tokInt, tokFloat:
		p.next()
		return &constExpr{v: t.num}
	case tokOp:
		switch t.val {
		case "(":
			p.next()
			e := p.parseTuple(true, false, nil, true)
			p.expectOp(")")
			return e
		case "[":
			return p.parseList()
		case "{":
			return p.parseDict()
		}
	}
	p.fail(t.line, "unexpected '%s'", t.describe())
	return nil
}

func (p *parser) parseList() expr {
	p.expectOp("[")
	var items []expr
	for !p.isOp("]") {
		if len(items) > 0 {
			p.expectOp(",")
		}
		if p.isOp("]") {
			break
		}
		items = append(items, p.parseExpression(true))
	}
	p.expectOp("]")
	return &listExpr{items: items}
}

func (p *parser) parseDict() expr {
	p.expectOp("{")
	d := &dictExpr{}
	for !p.isOp("}") {
		if len(d.keys) > 0 {
			p.expectOp(",")
		}
		if p.isOp("}") {
			break
		}
		k := p.parseExpression(true)
		p.expectOp(":")
		d.keys = append(d.keys, k)
		d.values = append(d.values, p.parseExpression(true))
	}
	p.expectOp("}")
	return d
}

func (p *parser) parsePostfix(e expr) expr {
	for {
		switch {
		case p.isOp(".") || p.isOp("["):
			e = p.parseSubscript(e)
		case p.isOp("("):
			e = p.parseCall(e)
		default:
			return e
		}
	}
}

func (p *parser) parseFilterExpr(e expr) expr {
	for {
		switch {
		case p.isOp("|"):
			p.next()
			e = p.parseFilterCall(e)
		case p.isName("is"):
			e = p.parseTest(e)
		case p.isOp("("):
			e = p.parseCall(e)
		default:
			return e
		}
	}
}

func (p *parser) parseSubscript(e expr) expr {
	t := p.next()
	if t.val == "." {
		a := p.next()
		switch a.typ {
		case tokName:
			return newGetattr(e, a.val, t.line)
		case tokInt:
			return &getitemExpr{obj: e, key: &constExpr{v: a.num}, line: t.line}
		}
		p.fail(a.line, "expected name or number")
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			p.expectOp(",")
		}
		args = append(args, p.parseSubscribed())
	}
	p.expectOp("]")
	if len(args) == 1 {
		g := &getitemExpr{obj: e, key: args[0], line: t.line}
		if c, ok := args[0].(*constExpr); ok {
			if s, ok := c.v.(string); ok {
				g.strKey, g.isStr = s, true
				g.missing = &undefined{obj: (*Dict)(nil), hasObj: true, name: s}
			}
		}
		return g
	}
	return &getitemExpr{obj: e, key: &tupleExpr{items: args}, line: t.line}
}

func newGetattr(obj expr, name string, line int) *getattrExpr {
	g := &getattrExpr{obj: obj, name: name, line: line}
	switch {
	case isDunder(name):
		g.dictAttr = 3
	case dictMethod(name) != nil:
		g.dictAttr = 1
	case unsafeMethod((*Dict)(nil), name):
		g.dictAttr = 2
	}
	g.missing = &undefined{obj: (*Dict)(nil), hasObj: true, name: name}
	return g
}

func (p *parser) parseSubscribed() expr {
	var parts [3]expr
	if p.isOp(":") {
		p.next()
	} else {
		e := p.parseExpression(true)
		if !p.isOp(":") {
			return e
		}
		p.next()
		parts[0] = e
	}
	if !p.isOp(":") && !p.isOp("]") && !p.isOp(",") {
		parts[1] = p.parseExpression(true)
	}
	if p.skipOp(":") {
		if !p.isOp("]") && !p.isOp(",") {
			parts[2] = p.parseExpression(true)
		}
	}
	return &sliceExpr{start: parts[0], stop: parts[1], step: parts[2]}
}

type callArgs struct {
	args      []expr
	kwNames   []string
	kwValues  []expr
	dynArgs   expr
	dynKwargs expr
}

func (p *parser) parseCallArgs() callArgs {
	t := p.expectOp("(")
	var a callArgs
	requireComma := false
	for !p.isOp(")") {
		if requireComma {
			p.expectOp(",")
			if p.isOp(")") {
				break
			}
		}
		switch {
		case p.isOp("*"):
			if a.dynArgs != nil || a.dynKwargs != nil {
				p.fail(t.line, "invalid syntax for function call expression")
			}
			p.next()
			a.dynArgs = p.parseExpression(true)
		case p.isOp("**"):
			if a.dynKwargs != nil {
				p.fail(t.line, "invalid syntax for function call expression")
			}
			p.next()
			a.dynKwargs = p.parseExpression(true)
		default:
			if p.cur().typ == tokName && p.peek().typ == tokOp && p.peek().val == "=" {
				if a.dynKwargs != nil {
					p.fail(t.line, "invalid syntax for function call expression")
				}
				name := p.next().val
				p.next()
				a.kwNames = append(a.kwNames, name)
				a.kwValues = append(a.kwValues, p.parseExpression(true))
			} else {
				if a.dynArgs != nil || a.dynKwargs != nil || a.kwNames != nil {
					p.fail(t.line, "invalid syntax for function call expression")
				}
				a.args = append(a.args, p.parseExpression(true))
			}
		}
		requireComma = true
	}
	p.expectOp(")")
	return a
}

func (p *parser) parseCall(fn expr) expr {
	line := p.cur().line
	a := p.parseCallArgs()
	c := &callExpr{fn: fn, args: a.args, kwNames: a.kwNames, kwValues: a.kwValues, dynArgs: a.dynArgs, dynKwargs: a.dynKwargs, line: line}
	if ga, ok := fn.(*getattrExpr); ok {
		c.methods = &methodSet{str: strMethod(ga.name), list: listMethod(ga.name), tuple: tupleMethod(ga.name), dict: dictMethod(ga.name)}
	}
	return c
}

// parseFilterCall parses "name(args)" after a pipe.
func (p *parser) parseFilterCall(input expr) *filterExpr {
	t := p.expectIdent()
	name := t.val
	for p.isOp(".") {
		p.next()
		name += "." + p.expectIdent().val
	}
	f := &filterExpr{input: input, name: name, line: t.line}
	if p.isOp("(") {
		a := p.parseCallArgs()
		f.args, f.kwNames, f.kwValues, f.dynArgs, f.dynKwargs = a.args, a.kwNames, a.kwValues, a.dynArgs, a.dynKwargs
	}
	f.fn = lookupFilter(name)
	if f.fn == nil && !p.soft {
		panic(parseError{&Error{Type: excAssertion, Message: fmt.Sprintf("No filter named %s.", repr(name)), Name: p.name, Line: t.line}})
	}
	return f
}

func (p *parser) parseTest(e expr) expr {
	t := p.next() // "is"
	negated := p.skipName("not")
	nt := p.expectIdent()
	name := nt.val
	for p.isOp(".") {
		p.next()
		name += "." + p.expectIdent().val
	}
	te := &testExpr{input: e, name: name, line: t.line}
	c := p.cur()
	switch {
	case c.typ == tokOp && c.val == "(":
		a := p.parseCallArgs()
		te.args, te.kwNames, te.kwValues, te.dynArgs, te.dynKwargs = a.args, a.kwNames, a.kwValues, a.dynArgs, a.dynKwargs
	case c.typ == tokName && c.val != "else" && c.val != "or" && c.val != "and",
		c.typ == tokString, c.typ == tokInt, c.typ == tokFloat,
		c.typ == tokOp && (c.val == "[" || c.val == "{"):
		if c.typ == tokName && c.val == "is" {
			p.fail(c.line, "You cannot chain multiple tests with is")
		}
		arg := p.parsePostfix(p.parsePrimary())
		te.args = []expr{arg}
	}
	te.fn = lookupTest(name)
	if te.fn == nil && !p.soft {
		panic(parseError{&Error{Type: excAssertion, Message: fmt.Sprintf("No test named %s.", repr(name)), Name: p.name, Line: t.line}})
	}
	if negated {
		return &notExpr{e: te}
	}
	return te
}
