package termchat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client talks to an OpenAI-compatible server.
type Client struct {
	// BaseURL is the server's address, with or without the /v1 suffix
	// (http://127.0.0.1:8080 and http://127.0.0.1:8080/v1 both work).
	BaseURL string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	// HTTP is the client used; nil means http.DefaultClient.
	HTTP *http.Client
}

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one chat turn to stream.
type Request struct {
	Model    string
	Messages []Message
	// Temperature and MaxTokens are sent when set; otherwise the server's
	// defaults apply.
	Temperature *float64
	MaxTokens   *int
	// IgnoreEOS asks the server (troupe, vLLM) to generate past the
	// model's end of sequence, up to MaxTokens.
	IgnoreEOS bool
}

// Delta is one streamed piece of a reply.
type Delta struct {
	Content   string
	Reasoning string
}

// Reply is a streamed reply, as much of it as arrived.
type Reply struct {
	Content   string
	Reasoning string
	// Finish is the finish_reason ("stop", "length", ...); "" when the
	// stream did not end normally.
	Finish string
}

// APIError is an error answer from the server: an HTTP status with the
// API's error object, or an error event inside a stream (Status 0).
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string {
	if e.Status == 0 {
		return "server error: " + e.Message
	}
	return fmt.Sprintf("server answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

func (c *Client) url(path string) string {
	base := strings.TrimRight(c.BaseURL, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + "/v1" + path
}

func (c *Client) do(req *http.Request) (*http.Response, error) {
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, errorAnswer(resp)
	}
	return resp, nil
}

// errorAnswer reads an error response: OpenAI's {"error": {"message"}},
// a bare {"message"} or {"error": "text"}, or else the body's text.
func errorAnswer(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := errorMessage(body)
	if msg == "" {
		msg = strings.TrimSpace(string(body))
	}
	if msg == "" {
		msg = "(no message)"
	}
	return &APIError{Status: resp.StatusCode, Message: msg}
}

// errorMessage is the message of an error object in the shapes servers
// use, or "" when body is none of them.
func errorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	var obj struct {
		Message string `json:"message"`
	}
	var text string
	switch {
	case json.Unmarshal(v.Error, &obj) == nil && obj.Message != "":
		return obj.Message
	case json.Unmarshal(v.Error, &text) == nil && text != "":
		return text
	}
	return v.Message
}

// Models lists the server's model names (GET /v1/models), in its order.
func (c *Client) Models(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/models"), nil)
	if err != nil {
		return nil, fmt.Errorf("listing models: %w", err)
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, fmt.Errorf("listing models: %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, MaxEventBytes)).Decode(&list); err != nil {
		return nil, fmt.Errorf("listing models: reading the answer: %w", err)
	}
	names := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		names = append(names, m.ID)
	}
	return names, nil
}

// Stream sends req to /v1/chat/completions with stream: true and calls
// onDelta with each piece of the reply as it arrives. It returns the reply
// when the stream ends. When ctx ends first it returns what arrived and
// ctx's error, so an interrupted reply is not lost.
func (c *Client) Stream(ctx context.Context, req Request, onDelta func(Delta)) (Reply, error) {
	body := map[string]any{"model": req.Model, "messages": req.Messages, "stream": true}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if req.MaxTokens != nil {
		body["max_tokens"] = *req.MaxTokens
	}
	if req.IgnoreEOS {
		body["ignore_eos"] = true
	}
	data, err := json.Marshal(body)
	if err != nil {
		return Reply{}, fmt.Errorf("chat request: %w", err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("/chat/completions"), bytes.NewReader(data))
	if err != nil {
		return Reply{}, fmt.Errorf("chat request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	resp, err := c.do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return Reply{}, ctx.Err()
		}
		return Reply{}, fmt.Errorf("chat request: %w", err)
	}
	defer resp.Body.Close()
	var (
		content, reasoning strings.Builder
		reply              Reply
		done               bool
	)
	errDone := errors.New("done")
	err = ReadEvents(resp.Body, func(ev Event) error {
		if ev.Data == "[DONE]" {
			done = true
			return errDone
		}
		if ev.Name == "error" {
			if msg := errorMessage([]byte(ev.Data)); msg != "" {
				return &APIError{Message: msg}
			}
			return &APIError{Message: ev.Data}
		}
		var chunk struct {
			Error   json.RawMessage `json:"error"`
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					Reasoning        string `json:"reasoning"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &chunk); err != nil {
			return fmt.Errorf("a stream event is not a JSON chunk: %w", err)
		}
		if len(chunk.Error) > 0 && string(chunk.Error) != "null" {
			msg := errorMessage([]byte(ev.Data))
			if msg == "" {
				msg = string(chunk.Error)
			}
			return &APIError{Message: msg}
		}
		for _, ch := range chunk.Choices {
			d := Delta{Content: ch.Delta.Content, Reasoning: ch.Delta.ReasoningContent}
			if d.Reasoning == "" {
				d.Reasoning = ch.Delta.Reasoning
			}
			if d.Content != "" || d.Reasoning != "" {
				content.WriteString(d.Content)
				reasoning.WriteString(d.Reasoning)
				onDelta(d)
			}
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				reply.Finish = *ch.FinishReason
			}
		}
		return nil
	})
	reply.Content, reply.Reasoning = content.String(), reasoning.String()
	switch {
	case ctx.Err() != nil:
		reply.Finish = ""
		return reply, ctx.Err()
	case err == errDone:
	case err != nil:
		return reply, fmt.Errorf("chat stream: %w", err)
	case !done && reply.Finish == "":
		return reply, errors.New("chat stream: the server ended the stream before the reply was complete")
	}
	return reply, nil
}
