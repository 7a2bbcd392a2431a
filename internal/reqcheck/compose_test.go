package reqcheck

import (
	"encoding/json"
	"testing"
)

// Composed bodies are always valid JSON objects.
func FuzzCompose(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{3, 1, 0, 2, 0, 4, 1, 2, 3, 7, 0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		body := Compose(data)
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("Compose(%v) = %s: %v", data, body, err)
		}
	})
}
