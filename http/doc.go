// Package http is troupe's HTTP surface on Fiber: the operational routes
// (/health, /ready, /metrics, /v1/models) and, in subpackages, one thin
// translator per API family into the one internal chat request
// (chat.Request). Every generating route goes through the same
// RequestPreparer and therefore the same render + encode path.
//
// Middleware: optional API keys (Authorization: Bearer), a request body
// limit, per-route request counting, and a bounded queue that answers 429
// with Retry-After when more requests wait than it holds.
package http
