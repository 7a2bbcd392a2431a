package hub

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestConfigFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want Config
	}{
		{"defaults", map[string]string{"HOME": "/home/u"}, Config{
			Endpoint: "https://huggingface.co", Home: "/home/u/.cache/huggingface", Cache: "/home/u/.cache/huggingface/hub",
			TokenPath: "/home/u/.cache/huggingface/token"}},
		{"XDG_CACHE_HOME moves the home", map[string]string{"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"}, Config{
			Endpoint: "https://huggingface.co", Home: "/xdg/huggingface", Cache: "/xdg/huggingface/hub", TokenPath: "/xdg/huggingface/token"}},
		{"HF_HOME, with ~ and $VARS", map[string]string{"HOME": "/home/u", "HF_HOME": "~/hf", "HF_HUB_CACHE": "$DATA/models", "DATA": "/data"}, Config{
			Endpoint: "https://huggingface.co", Home: "/home/u/hf", Cache: "/data/models", TokenPath: "/home/u/hf/token"}},
		{"legacy names", map[string]string{"HF_HOME": "/hf", "HUGGINGFACE_HUB_CACHE": "/old", "HUGGING_FACE_HUB_TOKEN": "hf_old", "TRANSFORMERS_OFFLINE": "1"}, Config{
			Endpoint: "https://huggingface.co", Home: "/hf", Cache: "/old", TokenPath: "/hf/token", Token: "hf_old", Offline: true}},
		{"new names win", map[string]string{"HF_HOME": "/hf", "HF_HUB_CACHE": "/new", "HUGGINGFACE_HUB_CACHE": "/old", "HF_TOKEN": " hf_new\n", "HUGGING_FACE_HUB_TOKEN": "hf_old"}, Config{
			Endpoint: "https://huggingface.co", Home: "/hf", Cache: "/new", TokenPath: "/hf/token", Token: "hf_new"}},
		{"endpoint without its trailing slash", map[string]string{"HF_HOME": "/hf", "HF_ENDPOINT": "https://mirror.example/", "HF_TOKEN_PATH": "/secrets/tok"}, Config{
			Endpoint: "https://mirror.example", Home: "/hf", Cache: "/hf/hub", TokenPath: "/secrets/tok"}},
		{"offline spelled true", map[string]string{"HF_HOME": "/hf", "HF_HUB_OFFLINE": "True"}, Config{
			Endpoint: "https://huggingface.co", Home: "/hf", Cache: "/hf/hub", TokenPath: "/hf/token", Offline: true}},
		{"offline 0 is online", map[string]string{"HF_HOME": "/hf", "HF_HUB_OFFLINE": "0"}, Config{
			Endpoint: "https://huggingface.co", Home: "/hf", Cache: "/hf/hub", TokenPath: "/hf/token"}},
		{"timeouts", map[string]string{"HF_HOME": "/hf", "HF_HUB_ETAG_TIMEOUT": "2.5", "HF_HUB_DOWNLOAD_TIMEOUT": "60"}, Config{
			Endpoint: "https://huggingface.co", Home: "/hf", Cache: "/hf/hub", TokenPath: "/hf/token", EtagTimeout: 2500 * time.Millisecond, DownloadTimeout: time.Minute}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.EtagTimeout == 0 {
				tc.want.EtagTimeout, tc.want.DownloadTimeout = 10*time.Second, 10*time.Second
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := ConfigFromEnv(func(k string) string { return map[string]string{"HF_HUB_ETAG_TIMEOUT": "soon"}[k] }); err == nil {
		t.Error("a malformed HF_HUB_ETAG_TIMEOUT was accepted")
	}
}

// TestTokenFile: without HF_TOKEN the token `hf auth login` saved is used;
// HF_TOKEN wins over it.
func TestTokenFile(t *testing.T) {
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "token"), []byte("hf_saved\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"HF_HOME": home}, "hf_saved"},
		{map[string]string{"HF_HOME": home, "HF_TOKEN": "hf_env"}, "hf_env"},
		{map[string]string{"HF_HOME": t.TempDir()}, ""},
	} {
		cfg, err := ConfigFromEnv(func(k string) string { return tc.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cfg.token(); err != nil || got != tc.want {
			t.Errorf("%v: token %q, %v; want %q", tc.env, got, err, tc.want)
		}
	}
}

func TestRepoIDs(t *testing.T) {
	for _, tc := range []struct {
		s         string
		id, looks bool
	}{
		{"meta-llama/Llama-3.2-1B", true, true},
		{"Qwen/Qwen2.5-0.5B-Instruct", true, true},
		{"gpt2", true, false}, // a Hub id, but as an argument a local folder
		{"./models/tiny", false, false},
		{"/abs/path", false, false},
		{"~/models", false, false},
		{"org/name/extra", false, false},
		{"org--x/name", false, false},
		{"org/na..me", false, false},
		{"org/name.git", false, false},
		{"org/-name", false, false},
		{"org/", false, false},
		{"", false, false},
		{"bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M", false, true}, // a GGUF model of a repository
		{"org/name:UD-Q4_K_XL", false, true},
		{"org/name:", false, false},
		{"org/name:Q4/../x", false, false},
		{"./dir:Q4_K_M", false, false},
	} {
		if got := IsRepoID(tc.s); got != tc.id {
			t.Errorf("IsRepoID(%q) = %v", tc.s, got)
		}
		if got := LooksLikeRepoID(tc.s); got != tc.looks {
			t.Errorf("LooksLikeRepoID(%q) = %v", tc.s, got)
		}
	}
	for _, rev := range []string{"main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"} {
		if err := checkRevision(rev); err != nil {
			t.Errorf("revision %q refused: %v", rev, err)
		}
	}
	for _, rev := range []string{"", "../x", "a//b", "/main", `a\b`} {
		if err := checkRevision(rev); err == nil {
			t.Errorf("revision %q accepted", rev)
		}
	}
}
