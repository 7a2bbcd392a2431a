package templates

// Statement nodes.
type node interface{}

type (
	textNode struct{ s string }

	outputNode struct {
		e    expr
		line int
	}

	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
		line   int
	}

	forNode struct {
		target    target
		iter      expr
		cond      expr // optional "if" filter
		body      []node
		els       []node
		recursive bool
		line      int
	}

	setNode struct {
		target target
		e      expr
		line   int
	}

	setBlockNode struct {
		target  target
		body    []node
		filters []*filterExpr // applied in order, input nil
		line    int
	}

	macroNode struct {
		def *macroDef
	}

	callBlockNode struct {
		call   *callExpr
		caller *macroDef
		line   int
	}

	filterBlockNode struct {
		filters []*filterExpr
		body    []node
		line    int
	}

	withNode struct {
		targets []target
		values  []expr
		body    []node
		line    int
	}

	scopeNode struct { // {% block %} and {% generation %}: the body, in its own scope
		body []node
		line int
	}

	breakNode    struct{ line int }
	continueNode struct{ line int }

	// unsupportedNode is a statement that needs a template loader
	// (include, import, extends); like jinja2 without a loader, it fails
	// only when executed.
	unsupportedNode struct {
		typ, msg string
		line     int
	}
)

// target is an assignment target: a name, a namespace attribute, or a
// tuple of targets.
type target struct {
	name  string
	attr  string   // set ns.attr = ...
	items []target // tuple unpacking
	tuple bool
}

type macroDef struct {
	name         string
	params       []string
	defaults     []expr // aligned with params; nil when none
	body         []node
	catchVarargs bool
	catchKwargs  bool
	usesCaller   bool
	line         int
}

// methodSet holds, for a call obj.name(...), the method called name of each
// builtin type, resolved once at compile time.
type methodSet struct {
	str, list, tuple, dict methodFn
}

// Expression nodes.
type expr interface{}

type (
	constExpr struct{ v any }

	nameExpr struct {
		name    string
		line    int
		missing *undefined // the value of the name when it is not defined
	}

	getattrExpr struct {
		obj  expr
		name string
		line int
		// dictAttr says how obj.name resolves on a dict: 0 the item
		// name, 1 a dict method, 2 a method the sandbox blocks, 3 a
		// dunder attribute (blocked too).
		dictAttr uint8
		// missing is what obj.name is on a dict without the key name:
		// immutable, so shared by every render.
		missing *undefined
	}

	getitemExpr struct {
		obj  expr
		key  expr
		line int
		// for a constant string key: the value obj[key] has on a dict
		// without the key (as getattrExpr.missing)
		strKey  string
		isStr   bool
		missing *undefined
	}

	sliceExpr struct {
		start, stop, step expr // each may be nil
	}

	callExpr struct {
		fn        expr
		methods   *methodSet // for obj.name(...): the builtin methods named name
		args      []expr
		kwNames   []string
		kwValues  []expr
		dynArgs   expr
		dynKwargs expr
		line      int
	}

	filterExpr struct {
		input     expr // nil for filter blocks
		name      string
		fn        filterFn // nil: unknown filter, an error when evaluated
		args      []expr
		kwNames   []string
		kwValues  []expr
		dynArgs   expr
		dynKwargs expr
		line      int
	}

	testExpr struct {
		input     expr
		name      string
		fn        testFn
		args      []expr
		kwNames   []string
		kwValues  []expr
		dynArgs   expr
		dynKwargs expr
		line      int
	}

	binExpr struct {
		op   string // - * / // % **
		l, r expr
		line int
	}

	// addExpr is a left-associative chain a + b + c ...; evaluated without
	// building intermediate strings when every operand is a str.
	addExpr struct {
		operands []expr
		line     int
	}

	concatExpr struct { // a ~ b ~ c
		parts []expr
		line  int
	}

	compareExpr struct {
		first    expr
		ops      []string // == != < <= > >= in notin
		operands []expr
		line     int
	}

	andExpr struct{ l, r expr }
	orExpr  struct{ l, r expr }
	notExpr struct{ e expr }

	unaryExpr struct {
		op   byte // '-' or '+'
		e    expr
		line int
	}

	condExpr struct {
		test, a, b expr // b may be nil
		line       int
	}

	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, values []expr }
)
