package templates

// ReprForTest is Python's repr of a template value, for tests.
func ReprForTest(v any) string { return repr(v) }
