package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/hub/hubtest"
)

// weights is pseudo-random content, bigger than one read buffer.
func weights(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// modelFiles is a small repository as the Hub holds one: what troupe needs,
// and files it does not (README, PyTorch weights) that must not be fetched.
func modelFiles() map[string][]byte {
	return map[string][]byte{
		"config.json":                              []byte(`{"model_type":"llama"}`),
		"generation_config.json":                   []byte(`{"do_sample":false}`),
		"tokenizer.json":                           []byte(`{"model":{"type":"BPE"}}`),
		"tokenizer_config.json":                    []byte(`{"add_bos_token":true}`),
		"special_tokens_map.json":                  []byte(`{}`),
		"chat_template.jinja":                      []byte(`{{ messages }}`),
		"additional_chat_templates/tool_use.jinja": []byte(`{{ tools }}`),
		"model.safetensors":                        weights(1, 600<<10),
		"README.md":                                []byte("# a model"),
		"pytorch_model.bin":                        weights(2, 1000),
	}
}

type fixture struct {
	srv   *hubtest.Server
	cache string
	env   map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	home := t.TempDir()
	return &fixture{srv: srv, cache: filepath.Join(home, "hub"), env: map[string]string{"HF_HOME": home, "HF_ENDPOINT": srv.URL}}
}

// client is a Client over the fixture's environment plus extra variables.
func (f *fixture) client(t *testing.T, extra ...string) *Client {
	t.Helper()
	env := map[string]string{}
	for k, v := range f.env {
		env[k] = v
	}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	cfg, err := ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, Options{RetryWait: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// count returns how many recorded requests match server ("hub"/"cdn") and
// contain part in their path.
func count(reqs []hubtest.Request, server, part string) int {
	n := 0
	for _, r := range reqs {
		if r.Server == server && strings.Contains(r.Path, part) {
			n++
		}
	}
	return n
}

// TestPullLayout: a fresh download leaves exactly huggingface_hub's cache
// layout: blobs named by ETag (git sha1 for regular files, sha256 for LFS),
// relative symlinks in snapshots/<commit>, refs/main holding the commit;
// only the files troupe reads; no token sent to the CDN.
func TestPullLayout(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	commit := f.srv.AddRepo("acme/tiny", files)
	snap, err := f.client(t, "HF_TOKEN", "hf_secret").Pull(context.Background(), "acme/tiny", "")
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(f.cache, "models--acme--tiny")
	if snap.Commit != commit || snap.Dir != filepath.Join(repoDir, "snapshots", commit) || snap.Revision != "main" {
		t.Fatalf("snapshot %+v, want commit %s in %s", snap, commit, repoDir)
	}
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err != nil || string(ref) != commit {
		t.Fatalf("refs/main = %q, %v; want %s", ref, err, commit)
	}
	want := []string{"additional_chat_templates/tool_use.jinja", "chat_template.jinja", "config.json", "generation_config.json",
		"model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"}
	var got []string
	filepath.WalkDir(snap.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(snap.Dir, p)
		got = append(got, filepath.ToSlash(rel))
		if d.Type()&fs.ModeSymlink == 0 {
			t.Errorf("%s is not a symlink", rel)
			return nil
		}
		name := filepath.ToSlash(rel)
		etag := hubtest.GitBlobSHA1(files[name])
		if hubtest.IsLFS(name) {
			etag = hubtest.SHA256(files[name])
		}
		target, _ := os.Readlink(p)
		wantTarget := strings.Repeat("../", 2+strings.Count(name, "/")) + "blobs/" + etag
		if target != wantTarget {
			t.Errorf("%s -> %s, want %s", name, target, wantTarget)
		}
		if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, files[name]) {
			t.Errorf("%s: content differs (%v)", name, err)
		}
		return nil
	})
	if !slices.Equal(got, want) {
		t.Errorf("snapshot holds %v, want %v", got, want)
	}
	blobs, _ := os.ReadDir(filepath.Join(repoDir, "blobs"))
	if len(blobs) != len(want) {
		t.Errorf("%d blobs, want %d (no leftovers, nothing unneeded)", len(blobs), len(want))
	}
	if snap.Downloaded == 0 {
		t.Error("Downloaded is 0 after a fresh download")
	}
	for _, r := range f.srv.Requests() {
		if r.Server == "cdn" && r.Auth != "" {
			t.Errorf("the token was sent to the CDN: %+v", r)
		}
		if r.Server == "hub" && r.Auth != "Bearer hf_secret" {
			t.Errorf("a Hub request without the token: %+v", r)
		}
	}
}

// TestPullCached: once a snapshot is complete, a second run asks only for
// the revision's commit (main may have moved) and requests no file; by
// commit hash, it requests nothing at all.
func TestPullCached(t *testing.T) {
	f := newFixture(t)
	commit := f.srv.AddRepo("acme/tiny", modelFiles())
	if _, err := f.client(t).Pull(context.Background(), "acme/tiny", "main"); err != nil {
		t.Fatal(err)
	}
	f.srv.ResetRequests()
	snap, err := f.client(t).Pull(context.Background(), "acme/tiny", "main")
	if err != nil {
		t.Fatal(err)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 1 || count(reqs, "hub", "/api/models/acme/tiny/revision/main") != 1 {
		t.Errorf("second run made %d requests, want only the revision lookup: %+v", len(reqs), reqs)
	}
	if snap.Downloaded != 0 || snap.Commit != commit {
		t.Errorf("second run: %+v", snap)
	}
	f.srv.ResetRequests()
	if _, err := f.client(t).Pull(context.Background(), "acme/tiny", commit); err != nil {
		t.Fatal(err)
	}
	if reqs := f.srv.Requests(); len(reqs) != 0 {
		t.Errorf("a cached commit made %d requests: %+v", len(reqs), reqs)
	}
}

// TestPullNewCommit: when main moves and only one file changed, the others'
// blobs are reused (a HEAD each, no download) and refs/main follows.
func TestPullNewCommit(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	old := f.srv.AddRepo("acme/tiny", files)
	if _, err := f.client(t).Pull(context.Background(), "acme/tiny", "main"); err != nil {
		t.Fatal(err)
	}
	files["config.json"] = []byte(`{"model_type":"llama","note":"v2"}`)
	commit := f.srv.AddRepo("acme/tiny", files)
	f.srv.ResetRequests()
	snap, err := f.client(t).Pull(context.Background(), "acme/tiny", "main")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Commit == old || snap.Commit != commit {
		t.Fatalf("pulled %s, want the new commit %s", snap.Commit, commit)
	}
	reqs := f.srv.Requests()
	if n := count(reqs, "cdn", ""); n != 0 {
		t.Errorf("the unchanged weights were downloaded again (%d CDN requests)", n)
	}
	if n := snap.Downloaded; n != int64(len(files["config.json"])) {
		t.Errorf("downloaded %d bytes, want only the new config.json", n)
	}
	ref, _ := os.ReadFile(filepath.Join(f.cache, "models--acme--tiny", "refs", "main"))
	if string(ref) != commit {
		t.Errorf("refs/main = %s, want %s", ref, commit)
	}
	if !isFile(filepath.Join(f.cache, "models--acme--tiny", "snapshots", old, "config.json")) {
		t.Error("the old snapshot lost its files")
	}
}

// TestPullOffline: with HF_HUB_OFFLINE a cached model is found by branch or
// commit with no request at all; an uncached or incomplete one fails,
// naming what is missing and how to get it.
func TestPullOffline(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	commit := f.srv.AddRepo("acme/tiny", files)
	f.srv.AddRepo("acme/other", modelFiles())
	if _, err := f.client(t).Pull(context.Background(), "acme/tiny", "main"); err != nil {
		t.Fatal(err)
	}
	f.srv.ResetRequests()
	off := f.client(t, "HF_HUB_OFFLINE", "1")
	for _, rev := range []string{"", "main", commit} {
		snap, err := off.Pull(context.Background(), "acme/tiny", rev)
		if err != nil {
			t.Fatalf("offline %q: %v", rev, err)
		}
		if snap.Commit != commit || !snap.FromCache || !isFile(filepath.Join(snap.Dir, "model.safetensors")) {
			t.Errorf("offline %q: %+v", rev, snap)
		}
	}
	for _, tc := range []struct{ repo, rev, want string }{
		{"acme/other", "main", "no refs/main"},
		{"acme/tiny", "v2", "no refs/v2"},
		{"acme/tiny", strings.Repeat("0", 40), "(commit 0000000000000000000000000000000000000000) is not in the cache"},
	} {
		_, err := off.Pull(context.Background(), tc.repo, tc.rev)
		if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
			t.Errorf("offline %s@%s: %v; want ErrNotCached mentioning %q and HF_HUB_OFFLINE", tc.repo, tc.rev, err, tc.want)
		}
	}
	// A blob removed behind the cache's back (hf cache delete, a full
	// disk) leaves a dangling pointer: the snapshot is incomplete.
	os.Remove(filepath.Join(f.cache, "models--acme--tiny", "blobs", hubtest.SHA256(files["model.safetensors"])))
	if _, err := off.Pull(context.Background(), "acme/tiny", "main"); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "missing model.safetensors") {
		t.Errorf("offline with the weights' blob gone: %v", err)
	}
	if reqs := f.srv.Requests(); len(reqs) != 0 {
		t.Errorf("offline mode made %d requests", len(reqs))
	}
}

// TestPullUnreachable: when the Hub cannot be reached, a complete cached
// snapshot is served; without one the error says the Hub is unreachable
// and suggests HF_HUB_OFFLINE.
func TestPullUnreachable(t *testing.T) {
	f := newFixture(t)
	commit := f.srv.AddRepo("acme/tiny", modelFiles())
	if _, err := f.client(t).Pull(context.Background(), "acme/tiny", "main"); err != nil {
		t.Fatal(err)
	}
	f.srv.Close()
	c := f.client(t)
	snap, err := c.Pull(context.Background(), "acme/tiny", "main")
	if err != nil || snap.Commit != commit || !snap.FromCache {
		t.Fatalf("unreachable Hub with a cached model: %+v, %v", snap, err)
	}
	_, err = c.Pull(context.Background(), "acme/absent", "main")
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE=1") || !strings.Contains(err.Error(), f.srv.URL) {
		t.Errorf("unreachable Hub, nothing cached: %v", err)
	}
}

// TestPullResume: a download cut mid-body is resumed with a Range request
// from where it stopped, in the same run; a partial file left by an earlier
// run is resumed the same way.
func TestPullResume(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	w := files["model.safetensors"]
	f.srv.AddRepo("acme/tiny", files)
	f.srv.CutOnce(w, 200<<10)
	snap, err := f.client(t).Pull(context.Background(), "acme/tiny", "main")
	if err != nil {
		t.Fatal(err)
	}
	var gets []string
	for _, r := range f.srv.Requests() {
		if r.Server == "cdn" {
			gets = append(gets, r.Method+" "+r.Range)
		}
	}
	if want := []string{"GET ", fmt.Sprintf("GET bytes=%d-", 200<<10)}; !slices.Equal(gets, want) {
		t.Errorf("CDN requests %q, want %q", gets, want)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors")); !bytes.Equal(b, w) {
		t.Error("the resumed file differs from the original")
	}

	// An earlier run's partial download.
	g := newFixture(t)
	g.srv.AddRepo("acme/tiny", files)
	blob := filepath.Join(g.cache, "models--acme--tiny", "blobs", hubtest.SHA256(w))
	os.MkdirAll(filepath.Dir(blob), 0o755)
	os.WriteFile(blob+".incomplete", w[:123456], 0o644)
	snap, err = g.client(t).Pull(context.Background(), "acme/tiny", "main")
	if err != nil {
		t.Fatal(err)
	}
	if snap.Downloaded != int64(len(w)-123456)+int64(sumOthers(files)) || count(g.srv.Requests(), "cdn", "") != 1 {
		t.Errorf("downloaded %d bytes in %d CDN requests", snap.Downloaded, count(g.srv.Requests(), "cdn", ""))
	}
	for _, r := range g.srv.Requests() {
		if r.Server == "cdn" && r.Range != "bytes=123456-" {
			t.Errorf("CDN request %+v, want Range bytes=123456-", r)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors")); !bytes.Equal(b, w) {
		t.Error("the resumed file differs from the original")
	}
	if _, err := os.Stat(blob + ".incomplete"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the partial file is still there: %v", err)
	}
}

// TestPullStall: a download that stops receiving for
// HF_HUB_DOWNLOAD_TIMEOUT is cut and resumed where it stopped.
func TestPullStall(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	w := files["model.safetensors"]
	f.srv.AddRepo("acme/tiny", files)
	f.srv.StallOnce(w, 100<<10)
	snap, err := f.client(t, "HF_HUB_DOWNLOAD_TIMEOUT", "0.2").Pull(context.Background(), "acme/tiny", "main")
	if err != nil {
		t.Fatal(err)
	}
	var ranges []string
	for _, r := range f.srv.Requests() {
		if r.Server == "cdn" {
			ranges = append(ranges, r.Range)
		}
	}
	if want := []string{"", fmt.Sprintf("bytes=%d-", 100<<10)}; !slices.Equal(ranges, want) {
		t.Errorf("CDN requests with ranges %q, want %q", ranges, want)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors")); !bytes.Equal(b, w) {
		t.Error("the resumed file differs from the original")
	}
}

// TestPullChecksum: content whose sha256 is not the ETag is refused; it
// leaves no blob, no partial file and no snapshot entry, and a partial file
// with a wrong prefix is caught the same way.
func TestPullChecksum(t *testing.T) {
	files := modelFiles()
	w := files["model.safetensors"]
	for _, tc := range []struct {
		name  string
		setup func(f *fixture, blob string)
	}{
		{"corrupted by the CDN", func(f *fixture, blob string) { f.srv.Corrupt(w) }},
		{"a partial file with a wrong prefix", func(f *fixture, blob string) {
			os.MkdirAll(filepath.Dir(blob), 0o755)
			os.WriteFile(blob+".incomplete", bytes.Repeat([]byte{7}, 1000), 0o644)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			commit := f.srv.AddRepo("acme/tiny", files)
			blob := filepath.Join(f.cache, "models--acme--tiny", "blobs", hubtest.SHA256(w))
			tc.setup(f, blob)
			_, err := f.client(t).Pull(context.Background(), "acme/tiny", "main")
			if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), "model.safetensors") {
				t.Fatalf("Pull: %v, want ErrChecksum naming the file", err)
			}
			for _, p := range []string{blob, blob + ".incomplete", filepath.Join(f.cache, "models--acme--tiny", "snapshots", commit, "model.safetensors")} {
				if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s is left behind", p)
				}
			}
		})
	}
}

// TestPullErrors: gated, private, missing repositories and revisions, and
// repositories troupe cannot serve, each give an error saying so.
func TestPullErrors(t *testing.T) {
	f := newFixture(t)
	f.srv.AddRepo("acme/gated", modelFiles(), hubtest.Gated("hf_good"))
	f.srv.AddRepo("acme/private", modelFiles(), hubtest.Private("hf_good"))
	f.srv.AddRepo("acme/torch", map[string][]byte{"config.json": []byte("{}"), "tokenizer.json": []byte("{}"), "pytorch_model.bin": weights(5, 100)})
	noTok := modelFiles()
	delete(noTok, "tokenizer.json")
	f.srv.AddRepo("acme/notok", noTok)
	for _, tc := range []struct {
		name, repo, rev, token string
		is                     error
		want                   []string
	}{
		{"gated, no token", "acme/gated", "", "", ErrGated, []string{"gated", "HF_TOKEN", "accept its terms", f.srv.URL + "/acme/gated", "HTTP 401"}},
		{"gated, token without access", "acme/gated", "", "hf_other", ErrGated, []string{"gated", "accept its terms", "HTTP 403"}},
		{"missing or private, no token", "acme/absent", "", "", ErrRepoNotFound, []string{"not found", "HF_TOKEN", "HTTP 401"}},
		{"private, token without access", "acme/private", "", "hf_other", ErrRepoNotFound, []string{"not found", "HTTP 404"}},
		{"missing revision", "acme/private", "v9", "hf_good", ErrRevisionNotFound, []string{`no revision "v9"`}},
		{"PyTorch only", "acme/torch", "", "", ErrUnsupported, []string{"pytorch_model.bin", "safetensors"}},
		{"no tokenizer.json", "acme/notok", "", "", ErrUnsupported, []string{"no tokenizer.json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.client(t, "HF_TOKEN", tc.token).Pull(context.Background(), tc.repo, tc.rev)
			if !errors.Is(err, tc.is) {
				t.Fatalf("%v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not mention %q", err, w)
				}
			}
		})
	}
	if _, err := os.Stat(filepath.Join(f.cache, "models--acme--torch")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a repository troupe cannot serve left a cache folder: %v", err)
	}
	for _, repo := range []string{"acme/gated", "acme/private"} {
		if _, err := f.client(t, "HF_TOKEN", "hf_good").Pull(context.Background(), repo, ""); err != nil {
			t.Errorf("%s with a good token: %v", repo, err)
		}
	}
	if _, err := f.client(t).Pull(context.Background(), "../etc", ""); err == nil {
		t.Error("a path was taken for a repository id")
	}
}

// TestPullSharded: with a shard index, the index and every shard it names
// are fetched; an index naming a shard the repository lacks, or a path
// outside the snapshot, is refused.
func TestPullSharded(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	delete(files, "model.safetensors")
	files["model.safetensors.index.json"] = []byte(`{"metadata":{"total_size":3},"weight_map":{
		"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","c":"model-00001-of-00002.safetensors"}}`)
	files["model-00001-of-00002.safetensors"] = weights(6, 300<<10)
	files["model-00002-of-00002.safetensors"] = weights(7, 100<<10)
	files["model-00001-of-00003.safetensors"] = weights(8, 10) // a stale shard the index does not name
	f.srv.AddRepo("acme/sharded", files)
	snap, err := f.client(t).Pull(context.Background(), "acme/sharded", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		if b, err := os.ReadFile(filepath.Join(snap.Dir, s)); err != nil || !bytes.Equal(b, files[s]) {
			t.Errorf("%s: %v", s, err)
		}
		if !slices.Contains(snap.Files, s) {
			t.Errorf("Files %v lacks %s", snap.Files, s)
		}
	}
	if _, err := os.Lstat(filepath.Join(snap.Dir, "model-00001-of-00003.safetensors")); err == nil {
		t.Error("a shard the index does not name was fetched")
	}
	// Offline, the cached index says which shards must be there.
	if _, err := f.client(t, "HF_HUB_OFFLINE", "1").Pull(context.Background(), "acme/sharded", ""); err != nil {
		t.Errorf("offline sharded: %v", err)
	}
	os.Remove(filepath.Join(snap.Dir, "model-00002-of-00002.safetensors"))
	if _, err := f.client(t, "HF_HUB_OFFLINE", "1").Pull(context.Background(), "acme/sharded", ""); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "model-00002-of-00002.safetensors") {
		t.Errorf("offline with a shard missing: %v", err)
	}

	for name, index := range map[string]string{
		"acme/lacking": `{"weight_map":{"a":"model-00009-of-00009.safetensors"}}`,
		"acme/escape":  `{"weight_map":{"a":"../../../../etc/passwd"}}`,
	} {
		bad := map[string][]byte{"config.json": []byte("{}"), "tokenizer.json": []byte("{}"), "model.safetensors.index.json": []byte(index)}
		f.srv.AddRepo(name, bad)
		if _, err := f.client(t).Pull(context.Background(), name, ""); err == nil || !strings.Contains(err.Error(), "index") && !strings.Contains(err.Error(), "unsafe") {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
}

// TestPullRenamed: a renamed repository's relative redirects are followed
// for the file list and the files; the cache keeps the name asked for.
func TestPullRenamed(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	f.srv.AddRepo("acme/new-name", files)
	f.srv.Move("acme/old-name", "acme/new-name")
	snap, err := f.client(t).Pull(context.Background(), "acme/old-name", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(snap.Dir, "models--acme--old-name") {
		t.Errorf("snapshot in %s", snap.Dir)
	}
	if b, _ := os.ReadFile(filepath.Join(snap.Dir, "model.safetensors")); !bytes.Equal(b, files["model.safetensors"]) {
		t.Error("weights differ")
	}
}

// TestPullConcurrent: two pulls of one model at once download each file
// once (the second waits on the blob's lock, then finds the blob).
func TestPullConcurrent(t *testing.T) {
	f := newFixture(t)
	f.srv.AddRepo("acme/tiny", modelFiles())
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.client(t).Pull(context.Background(), "acme/tiny", "")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := count(f.srv.Requests(), "cdn", ""); n != 1 {
		t.Errorf("the weights were downloaded %d times", n)
	}
}

// TestPullCancel: a cancelled context stops the download and keeps the
// partial file for the next run.
func TestPullCancel(t *testing.T) {
	f := newFixture(t)
	files := modelFiles()
	f.srv.AddRepo("acme/tiny", files)
	ctx, cancel := context.WithCancel(context.Background())
	c := f.client(t)
	c.progress = &cancelAfter{cancel: cancel}
	_, err := c.Pull(ctx, "acme/tiny", "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pull: %v", err)
	}
	partial := filepath.Join(f.cache, "models--acme--tiny", "blobs", hubtest.SHA256(files["model.safetensors"])) + ".incomplete"
	if st, err := os.Stat(partial); err != nil || st.Size() == 0 {
		t.Errorf("partial file after cancel: %v", err)
	}
}

// cancelAfter cancels as soon as the weights have bytes on disk.
type cancelAfter struct {
	cancel func()
	file   string
}

func (c *cancelAfter) Start(file string, _, _ int64) { c.file = file }
func (c *cancelAfter) Add(n int64) {
	if n > 0 && c.file == "model.safetensors" {
		c.cancel()
	}
}
func (c *cancelAfter) Finish(error) {}

// sumOthers is the size of the fetched files other than the weights.
func sumOthers(files map[string][]byte) int {
	n := 0
	for name, b := range files {
		switch name {
		case "model.safetensors", "README.md", "pytorch_model.bin":
		default:
			n += len(b)
		}
	}
	return n
}

// TestPullGGUF: a repository of GGUF files gives one model, chosen by the
// reference's quantization (org/name:QUANT, any case), Q4_K_M or the only
// one by default: a file, or every part of a split set (in a folder of its
// own or not), never a vision projector, a split set with a part missing or
// another quantization. Snapshot.Model is the (first) file to serve; the
// same reference is then served from the cache offline. A repository with
// safetensors weights is served as a Transformers model unless a
// quantization is named.
func TestPullGGUF(t *testing.T) {
	f := newFixture(t)
	f.srv.AddRepo("acme/tiny-GGUF", map[string][]byte{
		"README.md":                           []byte("q"),
		"tiny-Q4_K_M.gguf":                    weights(3, 100),
		"tiny-Q8_0.gguf":                      weights(4, 100),
		"mmproj-tiny-F16.gguf":                weights(5, 100),
		"Q6_K/tiny-Q6_K-00001-of-00002.gguf":  weights(6, 100),
		"Q6_K/tiny-Q6_K-00002-of-00002.gguf":  weights(7, 100),
		"tiny-UD-Q2_K_XL-00001-of-00002.gguf": weights(8, 100),  // part 2 missing
		"tiny-F16-00001-of-00000.gguf":        weights(15, 100), // a set of no parts
		"tiny.IQ4_XS.gguf":                    weights(9, 100),
	})
	f.srv.AddRepo("acme/two-GGUF", map[string][]byte{"a-Q5_K_M.gguf": weights(10, 100), "a-Q8_0.gguf": weights(11, 100)})
	f.srv.AddRepo("acme/one-GGUF", map[string][]byte{"a-Q5_K_M.gguf": weights(12, 100), "mmproj-F16.gguf": weights(13, 100)})
	both := modelFiles()
	both["tiny-Q8_0.gguf"] = weights(14, 100)
	f.srv.AddRepo("acme/both", both)
	for _, tc := range []struct {
		ref   string
		files []string // fetched, the first one served
	}{
		{"acme/tiny-GGUF", []string{"tiny-Q4_K_M.gguf"}},
		{"acme/tiny-GGUF:q8_0", []string{"tiny-Q8_0.gguf"}},
		{"acme/tiny-GGUF:Q6_K", []string{"Q6_K/tiny-Q6_K-00001-of-00002.gguf", "Q6_K/tiny-Q6_K-00002-of-00002.gguf"}},
		{"acme/tiny-GGUF:IQ4_XS", []string{"tiny.IQ4_XS.gguf"}},
		{"acme/one-GGUF", []string{"a-Q5_K_M.gguf"}},
		{"acme/both:Q8_0", []string{"tiny-Q8_0.gguf"}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			snap, err := f.client(t).Pull(context.Background(), tc.ref, "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(snap.Files, tc.files) {
				t.Errorf("fetched %v, want %v", snap.Files, tc.files)
			}
			if want := filepath.Join(snap.Dir, filepath.FromSlash(tc.files[0])); snap.Model != want {
				t.Errorf("Model = %s, want %s", snap.Model, want)
			}
			off, err := f.client(t, "HF_HUB_OFFLINE", "1").Pull(context.Background(), tc.ref, "")
			if err != nil || off.Model != snap.Model || !off.FromCache {
				t.Errorf("offline: %+v, %v", off, err)
			}
		})
	}
	snap, err := f.client(t).Pull(context.Background(), "acme/both", "")
	if err != nil || snap.Model != snap.Dir || slices.Contains(snap.Files, "tiny-Q8_0.gguf") {
		t.Errorf("acme/both without a quantization: %+v, %v", snap, err)
	}
	for _, tc := range []struct {
		ref  string
		is   error
		want []string
	}{
		{"acme/tiny-GGUF:Q5_K_M", ErrUnsupported, []string{"no GGUF model in quantization Q5_K_M", "Q4_K_M", "Q8_0", "Q6_K"}},
		{"acme/tiny-GGUF:Q2_K_XL", ErrUnsupported, []string{"quantization Q2_K_XL"}},
		{"acme/two-GGUF", ErrUnsupported, []string{"none is Q4_K_M", "acme/two-GGUF:QUANT", "Q5_K_M", "Q8_0"}},
		{"acme/tiny-GGUF:../x", nil, []string{"not a repository id"}},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			_, err := f.client(t).Pull(context.Background(), tc.ref, "")
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("%v, want %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not mention %q", err, w)
				}
			}
		})
	}
	if _, err := f.client(t, "HF_HUB_OFFLINE", "1").Pull(context.Background(), "acme/tiny-GGUF:Q5_K_M", ""); !errors.Is(err, ErrNotCached) {
		t.Errorf("offline, a quantization never fetched: %v", err)
	}
}
