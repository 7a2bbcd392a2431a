package cpu

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestBuildWithoutCgoSaysWhy: building without cgo fails with one line
// naming the fix, not with undefined names in the callers.
func TestBuildWithoutCgoSaysWhy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	cmd := exec.Command(gobin, "build", "-o", os.DevNull, "../../cmd/troupe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("a build without cgo succeeded")
	}
	if !strings.Contains(string(out), "troupe_needs_cgo__build_with_CGO_ENABLED_1_and_gcc_installed") || strings.Contains(string(out), "cpu.New") {
		t.Fatalf("build without cgo printed:\n%s", out)
	}
}
