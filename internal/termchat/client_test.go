package termchat

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestStream(t *testing.T) {
	f := newFake(t)
	f.setScript(func(w http.ResponseWriter, _ *http.Request, _ sent) {
		w.Write([]byte(": keep-alive\n\n"))
		event(w, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
		event(w, chunk(map[string]any{"reasoning_content": "Let me "}, nil))
		event(w, chunk(map[string]any{"reasoning": "think."}, nil))
		event(w, chunk(map[string]any{"content": "Hi"}, nil))
		event(w, chunk(map[string]any{"content": " there"}, nil))
		event(w, chunk(map[string]any{}, "length"))
		event(w, `{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`)
		event(w, "[DONE]")
	})
	temp, max := 0.5, 7
	for _, base := range []string{f.URL, f.URL + "/", f.URL + "/v1", f.URL + "/v1/"} {
		c := &Client{BaseURL: base, APIKey: "sk-test"}
		var deltas []Delta
		reply, err := c.Stream(context.Background(), Request{Model: "m", Messages: []Message{{"user", "hey"}},
			Temperature: &temp, MaxTokens: &max, IgnoreEOS: true}, func(d Delta) { deltas = append(deltas, d) })
		if err != nil {
			t.Fatalf("%s: %v", base, err)
		}
		want := Reply{Content: "Hi there", Reasoning: "Let me think.", Finish: "length"}
		if reply != want {
			t.Fatalf("%s: reply %+v, want %+v", base, reply, want)
		}
		wantDeltas := []Delta{{Reasoning: "Let me "}, {Reasoning: "think."}, {Content: "Hi"}, {Content: " there"}}
		if !reflect.DeepEqual(deltas, wantDeltas) {
			t.Fatalf("%s: deltas %+v", base, deltas)
		}
	}
	r := f.requests()[0]
	if r.Auth != "Bearer sk-test" || !r.Stream || r.Model != "m" || *r.Temperature != 0.5 || *r.MaxTokens != 7 || !r.IgnoreEOS {
		t.Fatalf("request as sent: %+v", r)
	}
	// Unset settings are not sent: the server's defaults apply.
	c := &Client{BaseURL: f.URL}
	if _, err := c.Stream(context.Background(), Request{Model: "m", Messages: []Message{{"user", "x"}}}, func(Delta) {}); err != nil {
		t.Fatal(err)
	}
	if r := f.requests()[4]; r.Auth != "" || r.Temperature != nil || r.MaxTokens != nil || r.IgnoreEOS {
		t.Fatalf("defaults sent: %+v", r)
	}
}

func TestStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script func(w http.ResponseWriter, r *http.Request, req sent)
		status int
		msg    string
	}{
		{"an OpenAI error object", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write([]byte(`{"error":{"message":"messages: the prompt is longer than the context","type":"invalid_request_error"}}`))
		}, 400, "the prompt is longer than the context"},
		{"a plain-text error", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			http.Error(w, "no such route", 404)
		}, 404, "no such route"},
		{"a string error", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":"invalid api key"}`))
		}, 401, "invalid api key"},
		{"an error inside the stream", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			event(w, chunk(map[string]any{"content": "par"}, nil))
			event(w, `{"error":{"message":"the server is shutting down","type":"server_error"}}`)
			event(w, "[DONE]")
		}, 0, "the server is shutting down"},
		{"an error event", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			w.Write([]byte("event: error\ndata: {\"message\":\"overloaded\"}\n\n"))
		}, 0, "overloaded"},
		{"a stream cut short", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			event(w, chunk(map[string]any{"content": "par"}, nil))
		}, -1, "before the reply was complete"},
		{"a stream of something else", func(w http.ResponseWriter, _ *http.Request, _ sent) {
			event(w, "not json")
		}, -1, "not a JSON chunk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t)
			f.setScript(tc.script)
			c := &Client{BaseURL: f.URL}
			_, err := c.Stream(context.Background(), Request{Model: "m", Messages: []Message{{"user", "x"}}}, func(Delta) {})
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %v, want one saying %q", err, tc.msg)
			}
			var api *APIError
			if tc.status >= 0 && (!errors.As(err, &api) || api.Status != tc.status) {
				t.Fatalf("error %#v, want an APIError with status %d", err, tc.status)
			}
		})
	}
}

func TestModels(t *testing.T) {
	f := newFake(t)
	got, err := (&Client{BaseURL: f.URL}).Models(context.Background())
	if err != nil || !reflect.DeepEqual(got, []string{"first-model", "second-model"}) {
		t.Fatalf("%v %v", got, err)
	}
	if _, err := (&Client{BaseURL: f.URL + "/nowhere"}).Models(context.Background()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a missing /v1/models: %v", err)
	}
}

// TestStreamCancel: ending the context stops the request (the server sees
// the client leave) and returns what arrived with the context's error.
func TestStreamCancel(t *testing.T) {
	f := newFake(t)
	left := make(chan struct{})
	f.setScript(endless(left))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got strings.Builder
	reply, err := (&Client{BaseURL: f.URL}).Stream(ctx, Request{Model: "m", Messages: []Message{{"user", "x"}}}, func(d Delta) {
		got.WriteString(d.Content)
		if got.Len() >= 3 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if reply.Content == "" || !strings.HasPrefix(reply.Content, got.String()) || reply.Finish != "" {
		t.Fatalf("partial reply %+v after %q", reply, got.String())
	}
	<-left
}

// endless streams "tok " until the client leaves, then closes left.
func endless(left chan struct{}) func(w http.ResponseWriter, r *http.Request, _ sent) {
	return func(w http.ResponseWriter, r *http.Request, _ sent) {
		defer close(left)
		for {
			select {
			case <-r.Context().Done():
				return
			default:
			}
			event(w, chunk(map[string]any{"content": "tok "}, nil))
			time.Sleep(time.Millisecond)
		}
	}
}
