package assets

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/actors"
	"github.com/troupe-ai/troupe/model/checkpoint"
)

// A model folder's assets go through Serve and Fetch (one actor system: the
// message is the one remote carries) and come out byte for byte, without
// the weights; the override template goes too.
func TestServeAndFetch(t *testing.T) {
	dir, err := checkpoint.Demo()
	if err != nil {
		t.Fatal(err)
	}
	override := filepath.Join(t.TempDir(), "mine.jinja")
	if err := os.WriteFile(override, []byte("{{ messages[0].content }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	defer system.Shutdown()
	if _, err := Serve(system, "troupe-demo", dir, override); err != nil {
		t.Fatal(err)
	}
	dest := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	model, tmpl, err := Fetch(ctx, system.Root, system.Address(), dest)
	if err != nil {
		t.Fatal(err)
	}
	if model != "troupe-demo" {
		t.Fatalf("model %q", model)
	}
	if b, err := os.ReadFile(tmpl); err != nil || string(b) != "{{ messages[0].content }}" {
		t.Fatalf("override %q: %q, %v", tmpl, b, err)
	}
	got := 0
	for _, name := range Files {
		want, err := os.ReadFile(filepath.Join(dir, name))
		if os.IsNotExist(err) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dest, name))
		if err != nil || string(b) != string(want) {
			t.Fatalf("%s: %d bytes, want %d (%v)", name, len(b), len(want), err)
		}
		got++
	}
	if got < 3 {
		t.Fatalf("only %d asset files came", got)
	}
	if m, _ := filepath.Glob(filepath.Join(dest, "*.safetensors")); len(m) != 0 {
		t.Fatalf("weights came: %v", m)
	}
}

func TestPackRefuses(t *testing.T) {
	empty := t.TempDir()
	if a := Pack("m", empty, ""); !strings.Contains(a.Error, "no tokenizer.json") || len(a.Files) != 0 {
		t.Fatalf("a folder without tokenizer.json: %+v", a)
	}
	big := t.TempDir()
	noise := make([]byte, MaxBytes+1024) // random: gzip cannot shrink it
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(filepath.Join(big, "tokenizer.json"), noise, 0o644); err != nil {
		t.Fatal(err)
	}
	if a := Pack("m", big, ""); !strings.Contains(a.Error, "--gateway --model DIR") || len(a.Files) != 0 {
		t.Fatalf("assets past MaxBytes: error %q, %d files", a.Error, len(a.Files))
	}
}

func TestUnpackRefusesOtherPaths(t *testing.T) {
	for _, name := range []string{"../evil.json", "model.safetensors", "additional_chat_templates/../../x.jinja", "/etc/passwd", "additional_chat_templates/.jinja"} {
		a := &actors.ModelAssets{Model: "m", Files: map[string][]byte{name: compress([]byte("x"))}}
		if _, err := Unpack(a, t.TempDir()); err == nil {
			t.Errorf("%q was written", name)
		}
	}
	a := &actors.ModelAssets{Model: "m", Files: map[string][]byte{"additional_chat_templates/tool_use.jinja": compress([]byte("t"))}}
	dir := t.TempDir()
	if _, err := Unpack(a, dir); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "additional_chat_templates", "tool_use.jinja")); string(b) != "t" {
		t.Fatalf("additional template: %q", b)
	}
	if _, err := Unpack(&actors.ModelAssets{Error: "nope"}, dir); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("an error answer: %v", err)
	}
}
