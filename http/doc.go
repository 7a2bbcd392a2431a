// Package http is troupe's HTTP surface on Fiber: the operational routes
// (/health, /ready, /metrics, /v1/models) and, in subpackages, one thin
// translator per API family into the one internal chat request
// (chat.Request). Every generating route goes through the same
// RequestPreparer and therefore the same render + encode path.
//
// A Server serves one runtime's model, and more with AddModel (a cluster
// member serves every model of the cluster, each through a runtime that
// routes to its replicas): each generating or inspecting route reads the
// body's "model" and hands the request to that model's translators, which
// share the admission queue and the store of Responses. With one model the
// body is not read here (its API answers a model it does not serve).
//
// Middleware: optional API keys (Authorization: Bearer), a request body
// limit, per-route request counting, and a bounded queue that answers 429
// with Retry-After when more requests wait than it holds.
package http
