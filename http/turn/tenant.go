package turn

import (
	"github.com/gofiber/fiber/v2"

	"github.com/troupe-ai/troupe/chat"
	"github.com/troupe-ai/troupe/kvcache"
)

// localTenant holds the tenant of the request's API key: the partition of
// the prompt cache and of stored responses it may use.
const localTenant = "troupe.tenant"

// SetTenant records the tenant of the request's API key (the auth
// middleware sets it; empty when the server has no keys).
func SetTenant(c *fiber.Ctx, tenant string) { c.Locals(localTenant, tenant) }

// Tenant is the tenant SetTenant recorded ("" when none).
func Tenant(c *fiber.Ctx) string {
	t, _ := c.Locals(localTenant).(string)
	return t
}

// Scope confines r's prompt-cache reuse to the request's tenant: its
// CacheScope (the client's prompt_cache_key) becomes that key's
// conversation under the tenant, so that nothing one API key cached is
// reused for, or reported as reusable to, another. Every route that
// generates or probes the cache calls it on the request it built.
func Scope(c *fiber.Ctx, r *chat.Request) {
	r.CacheScope = kvcache.JoinScope(Tenant(c), r.CacheScope)
}
