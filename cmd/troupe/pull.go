package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/troupe-ai/troupe/hub"
)

func cmdPull(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pull", flag.ContinueOnError)
	fs.SetOutput(stderr)
	revision := fs.String("revision", hub.DefaultRevision, "branch, tag or commit to fetch")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: troupe pull org/name[:QUANT] [--revision R]\n\n"+
			"Downloads the files troupe serves from a Hugging Face Hub model into the\n"+
			"Hugging Face cache (HF_HUB_CACHE, default ~/.cache/huggingface/hub) and\n"+
			"prints what to serve: the snapshot folder, or for a repository of GGUF\n"+
			"files the GGUF model of quantization QUANT (default Q4_K_M, or the only\n"+
			"one). Set HF_TOKEN for gated or private models.\n\nflags:\n")
		fs.PrintDefaults()
	}
	positional, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		fs.Usage()
		return errors.New("pull: give one repository id (org/name)")
	}
	if _, _, ok := hub.ParseModelRef(positional[0]); !ok {
		return fmt.Errorf("pull: %q is not a Hub repository id (org/name, or org/name:QUANT for a GGUF model)", positional[0])
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	snap, err := pullModel(ctx, positional[0], *revision, stderr, log)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	fmt.Fprintln(stdout, snap.Model)
	return nil
}

// isHubModel reports whether a model argument names a Hub repository: it
// has the form org/name and is not a local path.
func isHubModel(arg string) bool {
	if !hub.LooksLikeRepoID(arg) {
		return false
	}
	_, err := os.Stat(arg)
	return errors.Is(err, os.ErrNotExist)
}

// pullModel makes repo's revision present in the Hugging Face cache, as the
// environment (HF_*) configures it, showing progress on stderr, and returns
// the snapshot.
func pullModel(ctx context.Context, repo, revision string, stderr io.Writer, log *slog.Logger) (hub.Snapshot, error) {
	cfg, err := hub.ConfigFromEnv(os.Getenv)
	if err != nil {
		return hub.Snapshot{}, err
	}
	c, err := hub.New(cfg, hub.Options{
		Progress: hub.NewReporter(stderr, hub.ReporterOptions{Terminal: isTerminal(stderr)}),
		Logger:   log,
	})
	if err != nil {
		return hub.Snapshot{}, err
	}
	log.Info("fetching the model from the Hub", "repo", repo, "revision", revision, "endpoint", cfg.Endpoint, "cache", cfg.Cache, "offline", cfg.Offline)
	snap, err := c.Pull(ctx, repo, revision)
	if err != nil {
		return hub.Snapshot{}, err
	}
	log.Info("model snapshot ready", "repo", repo, "commit", snap.Commit, "dir", snap.Dir, "downloaded_bytes", snap.Downloaded, "from_cache", snap.FromCache)
	return snap, nil
}
