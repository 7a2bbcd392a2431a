package loadgen_test

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	troupe "github.com/troupe-ai/troupe"
	troupehttp "github.com/troupe-ai/troupe/http"
	"github.com/troupe-ai/troupe/loadgen"
)

// TestRunAgainstServer: a small run against a real server reports every
// request, the output tokens it asked for, and sane latencies.
func TestRunAgainstServer(t *testing.T) {
	rt, err := troupe.Start(context.Background(), troupe.Options{Threads: 1, Parallel: 4, KVBudget: 64 << 20, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	srv := troupehttp.New(rt, troupehttp.Config{Parallel: 4})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.App.Listener(ln)
	defer srv.Shutdown(5 * time.Second)
	rep, err := loadgen.Run(context.Background(), loadgen.Config{
		URL: "http://" + ln.Addr().String(), Concurrency: 3, Requests: 4, PromptTokens: 20,
		SharedPrefixTokens: 8, MaxTokens: 5, MultiTurn: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Errors != 0 || rep.Requests != 8 || rep.OutputTokens != 8*5 || rep.PromptTokens == 0 {
		t.Fatalf("report: %+v", rep)
	}
	if rep.TTFTms.N != 8 || rep.TTFTms.P50 <= 0 || rep.TTFTms.P99 < rep.TTFTms.P50 || len(rep.TTFTByTurnP50ms) != 2 {
		t.Fatalf("latencies: %+v", rep)
	}
	if _, err := loadgen.Run(context.Background(), loadgen.Config{URL: "http://x", Concurrency: 1, Requests: 1, PromptTokens: 4, SharedPrefixTokens: 4, MaxTokens: 1}); err == nil {
		t.Fatal("a shared prefix as long as the prompt was accepted")
	}
}
