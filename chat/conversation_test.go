package chat_test

import (
	"testing"

	"github.com/troupe-ai/troupe/chat"
)

// TestConversationKey: every turn of a conversation has its opening's key;
// conversations that open differently (system prompt, first question,
// content parts) have different keys; a request without a user message or
// without messages has none.
func TestConversationKey(t *testing.T) {
	key := func(js string) string { return (&chat.Request{Messages: msgs(t, js)}).ConversationKey() }
	turn1 := key(`[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a radix tree?"}]`)
	turn3 := key(`[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a radix tree?"},
		{"role":"assistant","content":"A compressed trie."},{"role":"user","content":"And a B-tree?"},
		{"role":"assistant","content":"A balanced search tree."},{"role":"user","content":"Which is faster?"}]`)
	if turn1 == "" || turn1 != turn3 {
		t.Fatalf("turn 1 key %q, turn 3 key %q: want the same, not empty", turn1, turn3)
	}
	for _, other := range []string{
		`[{"role":"system","content":"Be verbose."},{"role":"user","content":"What is a radix tree?"}]`,
		`[{"role":"user","content":"What is a radix tree?"}]`,
		`[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a B-tree?"}]`,
		`[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is a radix tree?"}]}]`,
	} {
		if k := key(other); k == turn1 || k == "" {
			t.Errorf("%s: key %q (turn 1's %q)", other, k, turn1)
		}
	}
	if k := key(`[{"role":"system","content":"Be brief."}]`); k != "" {
		t.Errorf("no user message: key %q", k)
	}
	if k := (&chat.Request{Prompt: "x"}).ConversationKey(); k != "" {
		t.Errorf("a completion: key %q", k)
	}
}
