//go:build race

package node

// raceBuild: this test binary runs under the race detector, so the
// processes it builds do too.
func init() { raceBuild = true }
