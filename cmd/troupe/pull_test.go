package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/troupe-ai/troupe/hub/hubtest"
	"github.com/troupe-ai/troupe/internal/syncbuf"
)

// fakeHub serves a tiny real checkpoint as the Hub repository
// troupe-test/tiny and points the HF_* environment at it and at a fresh
// cache; it returns the server, the commit and the cache folder.
func fakeHub(t *testing.T) (*hubtest.Server, string, string) {
	t.Helper()
	model := servableDir(t)
	entries, err := os.ReadDir(model)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"README.md": []byte("# tiny")}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(model, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	srv := hubtest.New()
	t.Cleanup(srv.Close)
	commit := srv.AddRepo("troupe-test/tiny", files)
	home := t.TempDir()
	for k, v := range map[string]string{
		"HF_ENDPOINT": srv.URL, "HF_HOME": home, "HF_HUB_CACHE": "", "HUGGINGFACE_HUB_CACHE": "", "HF_TOKEN": "",
		"HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "", "HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "TROUPE_REVISION": "",
	} {
		t.Setenv(k, v)
	}
	return srv, commit, filepath.Join(home, "hub")
}

// TestServeHubModel: `serve org/name` fetches the model from the Hub
// (HF_ENDPOINT) into the Hugging Face cache, serves it under the name
// org/name and gets to ready.
func TestServeHubModel(t *testing.T) {
	_, commit, cache := fakeHub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "troupe-test/tiny", "--port", "0", "--threads", "1", "--kv-budget", "8MiB"}, &out, &errOut)
	}()
	addrRE := regexp.MustCompile(`msg="troupe listening" addr=(\S+)`)
	var addr string
	deadline := time.Now().Add(60 * time.Second)
	for addr == "" {
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen:\n%s", errOut.String())
		}
		if m := addrRE.FindStringSubmatch(errOut.String()); m != nil {
			addr = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(errOut.String(), "model=troupe-test/tiny") {
		t.Errorf("not served as troupe-test/tiny:\n%s", errOut.String())
	}
	for {
		resp, err := http.Get("http://" + addr + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"troupe-test/tiny"`) {
		t.Errorf("/v1/models: %s", body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve after shutdown: %v", err)
	}
	snap := filepath.Join(cache, "models--troupe-test--tiny", "snapshots", commit)
	for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		if st, err := os.Lstat(filepath.Join(snap, f)); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Errorf("%s in the cache: %v", f, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(snap, "README.md")); err == nil {
		t.Error("README.md was fetched")
	}
}

// TestPullCommand: pull prints the snapshot folder; offline, it finds it
// again without the Hub, and fails clearly for a model it never fetched.
func TestPullCommand(t *testing.T) {
	srv, commit, cache := fakeHub(t)
	want := filepath.Join(cache, "models--troupe-test--tiny", "snapshots", commit)
	out, err := runCLI(t, "pull", "troupe-test/tiny")
	if err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("pull: %q, %v; want %s", out, err, want)
	}
	srv.Close()
	t.Setenv("HF_HUB_OFFLINE", "1")
	out, err = runCLI(t, "pull", "--revision", "main", "troupe-test/tiny")
	if err != nil || strings.TrimSpace(out) != want {
		t.Fatalf("offline pull: %q, %v; want %s", out, err, want)
	}
	if _, err := runCLI(t, "pull", "troupe-test/other"); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Errorf("offline pull of an uncached model: %v", err)
	}
	for _, args := range [][]string{{"pull"}, {"pull", "./local/dir"}, {"pull", "a/b", "c/d"}} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestServeHubErrors: a Hub model that cannot be fetched stops serve with
// the Hub's reason; --revision is refused beside a local folder.
func TestServeHubErrors(t *testing.T) {
	fakeHub(t)
	_, err := runCLI(t, "serve", "troupe-test/absent", "--port", "0")
	if err == nil || !strings.Contains(err.Error(), "not a local folder") || !strings.Contains(err.Error(), "repository not found") {
		t.Errorf("serve of a missing Hub model: %v", err)
	}
	_, err = runCLI(t, "serve", "troupe-test/tiny", "--revision", "v9", "--port", "0")
	if err == nil || !strings.Contains(err.Error(), `no revision "v9"`) {
		t.Errorf("serve of a missing revision: %v", err)
	}
	_, err = runCLI(t, "serve", servableDir(t), "--revision", "v1", "--port", "0")
	if err == nil || !strings.Contains(err.Error(), "--revision") {
		t.Errorf("--revision with a local folder: %v", err)
	}
}

// TestChatHubModel: troupe chat takes org/name as serve does, fetching it
// into the Hugging Face cache first.
func TestChatHubModel(t *testing.T) {
	_, _, cache := fakeHub(t)
	var out strings.Builder
	var errOut syncbuf.Buffer
	err := cmdChat(context.Background(), []string{"troupe-test/tiny", "--threads", "1", "--kv-budget", "8MiB", "--max-tokens", "3"}, strings.NewReader("hi\n"), &out, &errOut)
	if err != nil {
		t.Fatalf("chat troupe-test/tiny: %v\n%s", err, errOut.String())
	}
	if strings.TrimSpace(out.String()) == "" {
		t.Fatalf("no reply:\n%s", errOut.String())
	}
	if _, err := os.Stat(filepath.Join(cache, "models--troupe-test--tiny", "refs", "main")); err != nil {
		t.Fatalf("the model was not fetched into the cache: %v", err)
	}
}
