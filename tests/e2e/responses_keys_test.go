package e2e

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"
)

// TestResponsesSDKKeysAndReferences: with two API keys, the official
// client's second turn in the AI SDK's style (the first turn's output
// message as an item_reference) continues the conversation, the input
// items page through InputItems.ListAutoPaging, and the other key gets a
// 404 for the same response id; the cache reset needs the admin key.
func TestResponsesSDKKeysAndReferences(t *testing.T) {
	s := serve(t, "--model", qwen3Model(t), "--served-model-name", "tiny-qwen", "--api-key", "alice,bob", "--admin-key", "root")
	s.waitReady(t)
	alice := client(s, option.WithAPIKey("alice"))
	bob := client(s, option.WithAPIKey("bob"))
	turn1, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: "tiny-qwen", MaxOutputTokens: openai.Int(6), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("What is a troupe?", responses.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgID := turn1.Output[0].ID
	turn2, err := alice.Responses.New(ctx(t), responses.ResponseNewParams{
		Model: "tiny-qwen", MaxOutputTokens: openai.Int(4), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("What is a troupe?", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfItemReference(msgID),
			responses.ResponseInputItemParamOfMessage("And then?", responses.EasyInputMessageRoleUser),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if turn2.Usage.InputTokens <= turn1.Usage.InputTokens+turn1.Usage.OutputTokens {
		t.Fatalf("turn 2 has %d input tokens, turn 1 %d + %d: the reference did not bring the reply", turn2.Usage.InputTokens, turn1.Usage.InputTokens, turn1.Usage.OutputTokens)
	}
	var ids, texts []string
	pager := alice.Responses.InputItems.ListAutoPaging(ctx(t), turn2.ID, responses.InputItemListParams{Limit: openai.Int(1), Order: responses.InputItemListParamsOrderAsc})
	for pager.Next() {
		it := pager.Current()
		ids = append(ids, it.ID)
		texts = append(texts, it.Role)
	}
	if err := pager.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[1] != msgID || strings.Join(texts, ",") != "user,assistant,user" {
		t.Fatalf("input items %v (roles %v), want 3 with %s second", ids, texts, msgID)
	}
	_, err = bob.Responses.Get(ctx(t), turn1.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("bob's GET of alice's response: %v", err)
	}
	for key, want := range map[string]int{"alice": 403, "root": 200} {
		req, _ := http.NewRequest("POST", s.url+"/v1/cache/reset", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("cache reset with %s's key: %d, want %d", key, resp.StatusCode, want)
		}
	}
}
