// Package containers checks the Dockerfile and compose.yaml at the
// repository root without a Docker daemon: compose.yaml is loaded and
// validated by compose-go (the library docker compose itself uses), the
// Dockerfile is linted with dockerfile-utils (from the npm registry, through
// npx) and checked for what the images promise: a multi-stage build, no
// compiler in the final image, a non-root user and a healthcheck on
// /health through "troupe health".
package containers

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

const root = "../.."

func TestCompose(t *testing.T) {
	path, err := filepath.Abs(filepath.Join(root, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := loader.LoadConfigFiles(ctx, []string{path}, filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	details.Environment = types.Mapping{}
	project, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("troupe", true) })
	if err != nil {
		t.Fatalf("compose.yaml does not load: %v", err)
	}
	svc, ok := project.Services["troupe"]
	if !ok {
		t.Fatalf("compose.yaml has no troupe service: %v", project.ServiceNames())
	}
	if svc.Build == nil || svc.Build.Context != filepath.Dir(path) {
		t.Errorf("the troupe service does not build the repository: %+v", svc.Build)
	}
	if hc := svc.HealthCheck; hc == nil || !slices.Equal(hc.Test, types.HealthCheckTest{"CMD", "troupe", "health"}) {
		t.Errorf("healthcheck %+v, want troupe health", svc.HealthCheck)
	}
	if len(svc.Ports) != 1 || svc.Ports[0].Target != 8080 {
		t.Errorf("ports %+v, want the container's 8080 published", svc.Ports)
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
	line      int
}

func parseDockerfile(t *testing.T, src string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(l)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args), start})
		cur.Reset()
	}
	return out
}

func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	for _, in := range parseDockerfile(t, string(src)) {
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("line %d: %s before FROM", in.line, in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(stages))
	}
	final := stages[len(stages)-1]
	has := func(cmd, sub string) bool {
		return slices.ContainsFunc(final, func(in instruction) bool { return in.cmd == cmd && strings.Contains(in.args, sub) })
	}
	if base := final[0].args; strings.Contains(base, "golang") || strings.Contains(base, "gcc") {
		t.Errorf("the final image is built FROM %s, which has a compiler", base)
	}
	if has("RUN", "gcc") || has("RUN", "build-essential") || has("RUN", "golang") {
		t.Error("the final stage installs a compiler")
	}
	if !has("COPY", "--from=") {
		t.Error("the final stage copies nothing from the build stage")
	}
	users := slices.DeleteFunc(slices.Clone(final), func(in instruction) bool { return in.cmd != "USER" })
	if len(users) == 0 || users[len(users)-1].args == "root" || users[len(users)-1].args == "0" {
		t.Errorf("the final stage runs as root (USER instructions %v)", users)
	}
	if !has("HEALTHCHECK", `["troupe", "health"]`) {
		t.Error("no HEALTHCHECK running troupe health")
	}
	if !has("EXPOSE", "8080") || !has("ENV", "TROUPE_HOST=0.0.0.0") {
		t.Error("the image does not listen on every interface on 8080")
	}
}

// TestDockerfileLint runs dockerfile-utils' linter; any problem it reports
// fails the test (it exits 0 on warnings itself).
func TestDockerfileLint(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("npx is not on PATH: the Dockerfile lint needs Node.js and npm")
		}
		t.Skip("npx is not on PATH: install Node.js and npm to lint the Dockerfile")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npx, "--yes", "dockerfile-utils@0.16.3", "lint", filepath.Join(root, "Dockerfile"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("dockerfile-utils: %v\n%s", err, out.String())
	}
	if report := strings.TrimSpace(out.String()); report != "" {
		t.Fatalf("dockerfile-utils lint reports:\n%s", report)
	}
	// The linter finds real problems: a copy with two CMDs and a
	// lowercase instruction fails.
	bad := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(bad, []byte("FROM debian:bookworm-slim\ncmd [\"a\"]\nCMD [\"b\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	cmd = exec.CommandContext(ctx, npx, "--yes", "dockerfile-utils@0.16.3", "lint", bad)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || !strings.Contains(out.String(), "uppercase") {
		t.Fatalf("the linter missed a bad Dockerfile: %v\n%s", err, out.String())
	}
}
