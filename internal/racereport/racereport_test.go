package racereport

import (
	"strings"
	"testing"
)

func TestUpstreamShutdown(t *testing.T) {
	const etcdFlag = `
Write at 0x00c000207861 by main goroutine:
  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).Shutdown()
      /x/etcd_provider.go:117 +0x44
  github.com/asynkron/protoactor-go/cluster.(*Cluster).Shutdown()
      /x/cluster.go:145 +0x172
  github.com/troupe-ai/troupe/cluster/node.(*Node).Close()
      /x/node.go:242 +0x19c

Previous read at 0x00c000207861 by goroutine 39:
  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).keepAliveForever()
      /x/etcd_provider.go:168 +0x74f
  github.com/asynkron/protoactor-go/cluster/clusterproviders/etcd.(*Provider).startKeepAlive.func1()
      /x/etcd_provider.go:183 +0xcc
`
	const remoteFlag = `
Write at 0x00c00037a700 by main goroutine:
  github.com/asynkron/protoactor-go/remote.(*endpointManager).stop()
      /x/endpoint_manager.go:115 +0x405
  github.com/asynkron/protoactor-go/remote.(*Remote).Shutdown()
      /x/server.go:92 +0x95
  github.com/asynkron/protoactor-go/cluster.(*Cluster).Shutdown()
      /x/cluster.go:154 +0x22e
  github.com/troupe-ai/troupe/cluster/node.(*Node).Close()
      /x/node.go:247 +0x19c

Previous read at 0x00c00037a700 by goroutine 459:
  github.com/asynkron/protoactor-go/remote.(*endpointManager).removeEndpoint()
      /x/endpoint_manager.go:248 +0x73
  github.com/asynkron/protoactor-go/eventstream.(*EventStream).Publish()
      /x/eventstream.go:108 +0x2c6
`
	for name, report := range map[string]string{"etcd provider": etcdFlag, "remote": remoteFlag} {
		if !UpstreamShutdown(report) {
			t.Errorf("the %s shutdown-flag race was not recognised", name)
		}
	}
	// The other access made by troupe's code (a send of troupe's racing
	// remote's shutdown): troupe's race.
	troupeRead := strings.Replace(remoteFlag, "      /x/eventstream.go:108 +0x2c6\n",
		"      /x/eventstream.go:108 +0x2c6\n  github.com/troupe-ai/troupe/cluster/node.(*endpoint).publish()\n      /x/endpoint.go:1 +0x1\n", 1)
	// The write innermost in troupe's code.
	troupeWrite := strings.Replace(etcdFlag, "by main goroutine:\n",
		"by main goroutine:\n  github.com/troupe-ai/troupe/cluster/node.(*Node).Close()\n      /x/node.go:1 +0x1\n", 1)
	// Not under Cluster.Shutdown.
	noShutdown := strings.Replace(etcdFlag, "cluster.(*Cluster).Shutdown()", "cluster.(*Cluster).StartMember()", 1)
	for name, report := range map[string]string{"troupe's read": troupeRead, "troupe's write": troupeWrite, "no shutdown": noShutdown} {
		if report == etcdFlag || report == remoteFlag {
			t.Fatalf("%s: the fixture did not change", name)
		}
		if UpstreamShutdown(report) {
			t.Errorf("%s: taken for an upstream shutdown race", name)
		}
	}
}

// TestTroupes: a race in troupe's code is troupe's; protoactor's block-list
// race (no troupe frame) and its shutdown flags are not.
func TestTroupes(t *testing.T) {
	const blockList = `
Read at 0x00c0001a2b30 by goroutine 57:
  github.com/asynkron/protoactor-go/remote.(*BlockList).IsBlocked()
      /x/blocklist.go:52 +0x5c

Previous write at 0x00c0001a2b30 by goroutine 88:
  github.com/asynkron/protoactor-go/remote.(*BlockList).Block()
      /x/blocklist.go:40 +0x1a4
`
	ours := strings.Replace(blockList, "Read at 0x00c0001a2b30 by goroutine 57:\n",
		"Read at 0x00c0001a2b30 by goroutine 57:\n  github.com/troupe-ai/troupe/cluster/node.(*endpoint).topology()\n      /x/endpoint.go:1 +0x1\n", 1)
	if ours == blockList {
		t.Fatal("the fixture did not change")
	}
	for _, c := range []struct {
		name, access string
		want         bool
	}{{"protoactor's block list", blockList, false}, {"troupe's read", ours, true}} {
		if got := Troupes(c.access); got != c.want {
			t.Errorf("%s: Troupes = %v, want %v", c.name, got, c.want)
		}
	}
	if f := FirstFrame(blockList); f != "github.com/asynkron/protoactor-go/remote.(*BlockList).IsBlocked()" {
		t.Errorf("FirstFrame = %q", f)
	}
}

// TestCheckHostProgram: a host program's main (named by Check's also)
// calling Cluster.Shutdown while protoactor's own goroutine reads the flag
// is protoactor's shutdown race, logged; the same report with the read in
// the host program is the program's, a failure.
func TestCheckHostProgram(t *testing.T) {
	const report = `
==================
WARNING: DATA RACE
Write at 0x00c00030c7f0 by main goroutine:
  github.com/asynkron/protoactor-go/remote.(*endpointReader).suspend()
      /x/endpoint_reader.go:255 +0x30
  github.com/asynkron/protoactor-go/remote.(*Remote).Shutdown()
      /x/server.go:91 +0x71
  github.com/asynkron/protoactor-go/cluster.(*Cluster).Shutdown()
      /x/cluster.go:154 +0x22e
  main.main.deferwrap1()
      /repo/examples/cluster/main.go:62 +0x33

Previous read at 0x00c00030c7f0 by goroutine 304:
  github.com/asynkron/protoactor-go/remote.(*endpointReader).Receive()
      /x/endpoint_reader.go:75 +0x375
  google.golang.org/grpc.(*Server).processStreamingRPC()
      /x/server.go:1673 +0x1f5c

Goroutine 304 (finished) created at:
  google.golang.org/grpc.(*Server).serveStreams.func2()
      /x/server.go:1040 +0x212
==================
`
	rec := &recorder{TB: t}
	Check(rec, "host", report, "examples/cluster/main.go")
	if rec.failed {
		t.Fatal("protoactor's shutdown race under a host program's Cluster.Shutdown failed the check")
	}
	ours := strings.Replace(report, "      /x/endpoint_reader.go:75 +0x375\n",
		"      /x/endpoint_reader.go:75 +0x375\n  main.handle()\n      /repo/examples/cluster/main.go:99 +0x1\n", 1)
	rec = &recorder{TB: t}
	Check(rec, "host", ours, "examples/cluster/main.go")
	if !rec.failed {
		t.Fatal("a race whose other access runs through the host program passed the check")
	}
}

// recorder records Errorf instead of failing the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Errorf(format string, args ...any) { r.failed = true }
func (r *recorder) Helper()                           {}
func (r *recorder) Logf(format string, args ...any)   {}
