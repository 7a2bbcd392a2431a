package kvcache

import "strings"

// A cache scope (the Scope of an engine request, a PrefillJob's
// CacheScope) has two parts: the tenant, which partitions every prompt
// cache (an API key's share of the server: nothing cached under one tenant
// is ever reused, or reported as reusable, under another), and the
// conversation (OpenAI's prompt_cache_key), which only narrows snapshot
// lookups. The empty tenant is the default one, used when the server has no
// API keys.
//
// JoinScope and SplitScope encode the two in one string: the tenant, then
// scopeSep, then the conversation. A scope without scopeSep is a bare
// conversation of the default tenant, so a plain prompt_cache_key keeps its
// old meaning.
const scopeSep = "\x1f"

// JoinScope is the cache scope of conversation conv under tenant.
func JoinScope(tenant, conv string) string {
	if tenant == "" && !strings.Contains(conv, scopeSep) {
		return conv
	}
	return tenant + scopeSep + conv
}

// SplitScope returns the tenant and the conversation of a cache scope.
func SplitScope(scope string) (tenant, conv string) {
	t, c, ok := strings.Cut(scope, scopeSep)
	if !ok {
		return "", scope
	}
	return t, c
}

// scopeMatches reports whether a snapshot stored under entry may serve a
// lookup under scope: same tenant always; same conversation when the lookup
// names one (an empty conversation searches all of its tenant's).
func scopeMatches(entry, scope string) bool {
	et, ec := SplitScope(entry)
	t, c := SplitScope(scope)
	return et == t && (c == "" || ec == c)
}
