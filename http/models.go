package http

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	troupe "github.com/troupe-ai/troupe"
	"github.com/troupe-ai/troupe/http/apierr"
)

// AddModel serves rt's model beside the models already served: requests
// whose "model" names it go to rt (a cluster member adds a runtime for each
// model some replica of the cluster serves; see cluster/gateway). The
// first runtime, New's, stays the default for requests that name no model
// and answers /health, /ready, /metrics and the cache routes. Adding a
// model already served does nothing; AddModel is safe while serving.
func (s *Server) AddModel(rt *troupe.Runtime) {
	for {
		cur := s.served.Load()
		if slices.ContainsFunc(*cur, func(m *modelAPI) bool { return m.rt.Name() == rt.Name() }) {
			return
		}
		first := (*cur)[0]
		m := &modelAPI{rt: rt, chat: first.chat.For(rt), msgs: first.msgs.For(rt), resp: first.resp.For(rt)}
		next := append(slices.Clip(*cur), m)
		if s.served.CompareAndSwap(cur, &next) {
			s.log.Info("serving a model", "model", rt.Name())
			return
		}
	}
}

// Models returns the names of the served models, the default first.
func (s *Server) Models() []string {
	var names []string
	for _, m := range *s.served.Load() {
		names = append(names, m.rt.Name())
	}
	return names
}

// byModel is the handler of one route of every served model: it runs
// handler on the API (of kind A, picked by api) of the model the request
// names.
func byModel[A any](s *Server, api func(*modelAPI) A, handler func(A, *fiber.Ctx) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		m, ok := s.modelFor(c)
		if !ok {
			return nil // answered
		}
		return handler(api(m), c)
	}
}

// modelFor returns the served model the request's body names. With one
// model it is that model whatever the body says (its API answers a
// mismatch). With several, a body naming none (or not a JSON object) gets
// the default model, whose API judges the body; one naming a model that is
// not served is answered 404 here, in the route's error shape, and ok is
// false.
func (s *Server) modelFor(c *fiber.Ctx) (m *modelAPI, ok bool) {
	all := *s.served.Load()
	if len(all) == 1 {
		return all[0], true
	}
	var named struct {
		Model *string `json:"model"`
	}
	if json.Unmarshal(c.Body(), &named) != nil || named.Model == nil || *named.Model == "" {
		return all[0], true
	}
	for _, m := range all {
		if m.rt.Name() == *named.Model {
			return m, true
		}
	}
	msg := "the model " + strconv.Quote(*named.Model) + " does not exist; this server serves " + strings.Join(quoteAll(s.Models()), ", ")
	if isAnthropic(c) {
		_ = apierr.Anthropic(c, fiber.StatusNotFound, msg)
	} else {
		_ = apierr.OpenAI(c, fiber.StatusNotFound, msg, "model")
	}
	return nil, false
}

func quoteAll(names []string) []string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return q
}

// models serves GET /v1/models: every served model, with vLLM's
// max_model_len (the most positions one request may use: the model's, cut
// by --max-model-len and by the KV pool) once it is loaded, and in
// default_sampling_params which sampling parameters a request that leaves
// them out gets from the model's generation_config.json ({}: none, the
// server's own defaults apply) once its files are read, and in
// preserve_thinking what the chat template does with earlier turns'
// reasoning: supported (it keeps some), default (requests get
// preserve_thinking unless they set it: the prompt cache is on), and the
// probe's findings (template_variable: it reads preserve_thinking;
// history: reasoning before the last user message is kept; tool_loop:
// reasoning since it is).
func (s *Server) models(c *fiber.Ctx) error {
	var data []fiber.Map
	for _, api := range *s.served.Load() {
		rt := api.rt
		m := fiber.Map{"id": rt.Name(), "object": "model", "created": rt.Started().Unix(), "owned_by": "troupe", "root": rt.Name()}
		if l, ok := rt.Limits(); ok && l.Context() > 0 {
			m["max_model_len"] = l.Context()
		}
		if d, ok := rt.SamplingDefaults(); ok {
			m["default_sampling_params"] = d
		}
		if p, on, ok := rt.PreserveThinking(); ok {
			m["preserve_thinking"] = fiber.Map{"supported": p.Supported(), "default": on,
				"template_variable": p.Variable, "history": p.History, "tool_loop": p.ToolLoop}
		}
		data = append(data, m)
	}
	return c.JSON(fiber.Map{"object": "list", "data": data})
}
