package http_test

import (
	"context"
	"testing"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
)

// GET /v1/cluster answers Config.Cluster's value, behind the API key, and
// 404 on a server that is not a cluster member.
func TestClusterRoute(t *testing.T) {
	single := startWith(t, troupe.Options{}, troupehttp.Config{}, nil)
	if code, _ := single.do(t, "GET", "/v1/cluster", ""); code != 404 {
		t.Fatalf("GET /v1/cluster on a single process: %d, want 404", code)
	}
	member := startWith(t, troupe.Options{}, troupehttp.Config{APIKeys: []string{"k"}, Cluster: func(ctx context.Context) any {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the cluster status is asked for without a deadline")
		}
		return map[string]any{"self": "m1", "members": []map[string]any{{"id": "m1", "routable": true}}}
	}}, nil)
	if code, _ := member.do(t, "GET", "/v1/cluster", ""); code != 401 {
		t.Fatalf("GET /v1/cluster without the key: %d, want 401", code)
	}
	code, body := member.do(t, "GET", "/v1/cluster", "", "Authorization", "Bearer k")
	members, _ := body["members"].([]any)
	if code != 200 || body["self"] != "m1" || len(members) != 1 {
		t.Fatalf("GET /v1/cluster: %d %v", code, body)
	}
}
