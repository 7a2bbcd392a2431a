// Package racereport judges the race detector's reports in the output of a
// child process: the cluster tests run every Proto.Actor cluster member as
// a process of its own, because the pinned protoactor-go races with itself
// inside every member (remote.BlockList reads its member set without the
// lock its writers take; the GossipActor changes gossip state an endpoint
// writer is still marshalling; shutdown flags are written under
// Cluster.Shutdown while protoactor's own goroutines read them). A test
// fails on a report whose racing accesses run through troupe's code, and
// only logs protoactor's own.
package racereport

import (
	"strings"
	"testing"
)

const (
	troupe   = "github.com/troupe-ai/troupe/"
	upstream = "github.com/asynkron/protoactor-go/"
)

// Check fails t for every race report in out (the output of the process
// called name) that is troupe's, or that names a frame containing one of
// also (e.g. "examples/cluster/main.go" for a program outside the module's
// import paths); it logs how many of protoactor's own it saw, by the first
// frame of the access.
func Check(t testing.TB, name, out string, also ...string) {
	t.Helper()
	theirs := map[string]int{}
	for _, block := range strings.Split(out, "WARNING: DATA RACE")[1:] {
		block, _, _ = strings.Cut(block, "==================")
		access, _, _ := strings.Cut(block, "\nGoroutine ")
		if (strings.Contains(access, troupe) || containsAny(access, also)) && !upstreamShutdown(access, also) {
			t.Errorf("the %s process reported a data race in troupe's code:%s", name, block)
			continue
		}
		theirs[FirstFrame(access)]++
	}
	for frame, n := range theirs {
		t.Logf("the %s process reported %d race(s) inside the pinned protoactor-go (at %s)", name, n, frame)
	}
}

// Troupes says whether the racing accesses of a report (the part before
// its goroutine list) are troupe's: a frame of troupe's code is in them,
// and the report is not one of protoactor's shutdown flags
// (UpstreamShutdown).
func Troupes(access string) bool {
	return strings.Contains(access, troupe) && !UpstreamShutdown(access)
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// FirstFrame is the first function named in a race report's access stack.
func FirstFrame(access string) string {
	for _, line := range strings.Split(access, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasSuffix(line, ")") && strings.Contains(line, ".") && !strings.Contains(line, " ") {
			return line
		}
	}
	return "?"
}

// UpstreamShutdown says whether a race report is one of the pinned
// protoactor-go's shutdown flags: one access is inside protoactor, under
// Cluster.Shutdown (which troupe's Node.Close calls, hence troupe's frames
// in its stack: the etcd provider's Shutdown, remote's
// endpointManager.stop), and the other is made by a goroutine of
// protoactor's own (the etcd provider's keep-alive or watch, remote's
// endpoint writer) with no frame of troupe's. Nothing troupe does can
// order the two; a race with one of troupe's own goroutines is not excused.
func UpstreamShutdown(access string) bool { return upstreamShutdown(access, nil) }

// upstreamShutdown is UpstreamShutdown where the frames containing one of
// also (a program outside the module, such as examples/cluster's main,
// calling Cluster.Shutdown) count as troupe's.
func upstreamShutdown(access string, also []string) bool {
	a, b, ok := strings.Cut(access, "\nPrevious ")
	if !ok {
		return false
	}
	shutdown := func(s string) bool {
		return strings.HasPrefix(FirstFrame(s), upstream) && strings.Contains(s, upstream+"cluster.(*Cluster).Shutdown()")
	}
	theirs := func(s string) bool {
		return strings.HasPrefix(FirstFrame(s), upstream) && !strings.Contains(s, troupe) && !containsAny(s, also)
	}
	return (shutdown(a) && theirs(b)) || (shutdown(b) && theirs(a))
}
