// Package assets lets a gateway-only cluster member prepare requests for a
// model whose folder it does not have: each replica runs an assets server,
// an actor under the well-known name Name, which answers a
// ModelAssetsQuery with the served model name and the model folder's asset
// files (Files: the tokenizer, the chat template, the generation config and
// config.json, which names the EOS tokens), never the weights. The gateway
// writes them into a folder of its own and starts its runtime there without
// weights (troupe.Options.NoWeights), so it renders and tokenizes exactly as
// the replica would.
//
// The files cross as one protobuf message through protoactor remote, each
// gzip-compressed. The pinned remote sets no gRPC message size, so gRPC's
// default 4 MiB receive limit applies to a whole batch of messages; an
// answer is therefore refused past MaxBytes compressed (a tokenizer.json of
// 10 MB compresses to about 2 MB), and the gateway then needs the folder
// itself (serve --gateway --model DIR).
package assets

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/troupe-ai/troupe/actors"
)

// Name is the name every replica spawns its assets server under.
const Name = "troupe-assets"

// Files are the model folder's files a gateway needs, where present; the
// additional chat templates (additional_chat_templates/*.jinja) go too.
var Files = []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
	"special_tokens_map.json", "chat_template.jinja", "chat_template.json"}

// MaxBytes bounds an answer's compressed files.
const MaxBytes = 3 << 20

// Pack reads the assets of the model folder dir (and the chat template
// override file, when not "") into an answer for model. A failure is
// reported in the answer's Error.
func Pack(model, dir, override string) *actors.ModelAssets {
	a := &actors.ModelAssets{Model: model, Files: map[string][]byte{}}
	names := append([]string(nil), Files...)
	extra, _ := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	for _, p := range extra {
		names = append(names, "additional_chat_templates/"+filepath.Base(p))
	}
	total := 0
	fail := func(err error) *actors.ModelAssets {
		return &actors.ModelAssets{Model: model, Error: err.Error()}
	}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fail(err)
		}
		z := compress(b)
		total += len(z)
		a.Files[name] = z
	}
	if _, ok := a.Files["tokenizer.json"]; !ok {
		return fail(fmt.Errorf("the model folder %s has no tokenizer.json", dir))
	}
	if override != "" {
		b, err := os.ReadFile(override)
		if err != nil {
			return fail(err)
		}
		a.ChatTemplate = compress(b)
		total += len(a.ChatTemplate)
	}
	if total > MaxBytes {
		return fail(fmt.Errorf("the model's assets are %d bytes compressed, more than the %d a cluster message carries: give the gateway the model folder (serve --gateway --model DIR)", total, MaxBytes))
	}
	return a
}

func compress(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b) // a bytes.Buffer does not fail
	_ = w.Close()
	return buf.Bytes()
}

// Unpack writes a's files into dir (which must exist) and returns the path
// of the chat template override it carried ("" when none).
func Unpack(a *actors.ModelAssets, dir string) (override string, err error) {
	if a.Error != "" {
		return "", fmt.Errorf("the replica could not send its model's assets: %s", a.Error)
	}
	names := make([]string, 0, len(a.Files))
	for name := range a.Files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !allowed(name) {
			return "", fmt.Errorf("the replica sent an unexpected asset %q", name)
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := writeGunzipped(path, a.Files[name]); err != nil {
			return "", fmt.Errorf("asset %s: %w", name, err)
		}
	}
	if len(a.ChatTemplate) > 0 {
		override = filepath.Join(dir, "chat-template-override.jinja")
		if err := writeGunzipped(override, a.ChatTemplate); err != nil {
			return "", fmt.Errorf("chat template: %w", err)
		}
	}
	return override, nil
}

// allowed reports whether name is one of the files Pack sends: a name of
// Files, or a .jinja file directly in additional_chat_templates (never a
// path out of the folder).
func allowed(name string) bool {
	for _, f := range Files {
		if name == f {
			return true
		}
	}
	base, ok := strings.CutPrefix(name, "additional_chat_templates/")
	return ok && strings.HasSuffix(base, ".jinja") && !strings.ContainsAny(base, `/\`) && base != ".jinja" && !strings.HasPrefix(base, ".")
}

func writeGunzipped(path string, z []byte) error {
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(r, 256<<20))
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Serve spawns the assets server of a replica serving model from the folder
// dir (with the chat template override file, when not ""): it answers every
// ModelAssetsQuery with Pack's answer, read once.
func Serve(system *actor.ActorSystem, model, dir, override string) (*actor.PID, error) {
	var answer *actors.ModelAssets
	return system.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actors.ModelAssetsQuery); ok && c.Sender() != nil {
			if answer == nil {
				answer = Pack(model, dir, override)
			}
			c.Respond(answer)
		}
	}), Name)
}

// Fetch asks the assets server of the member at address (remote host:port)
// for its model's assets and writes them into dir: the served model name and
// the chat template override's path ("" when none).
func Fetch(ctx context.Context, root *actor.RootContext, address, dir string) (model, override string, err error) {
	timeout := 30 * time.Second
	if d, ok := ctx.Deadline(); ok {
		timeout = time.Until(d)
	}
	res, err := root.RequestFuture(actor.NewPID(address, Name), &actors.ModelAssetsQuery{}, timeout).Result()
	if err != nil {
		return "", "", fmt.Errorf("model assets from %s: %w", address, err)
	}
	a, ok := res.(*actors.ModelAssets)
	if !ok {
		return "", "", fmt.Errorf("model assets from %s: answered %T", address, res)
	}
	if override, err = Unpack(a, dir); err != nil {
		return "", "", err
	}
	return a.Model, override, nil
}
