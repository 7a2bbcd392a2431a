package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// Config is where the Hub is, who the client is, and where the cache lives:
// what huggingface_hub reads from its environment variables. The zero value
// is not usable; start from ConfigFromEnv.
type Config struct {
	// Endpoint is the Hub's base URL without a trailing slash (HF_ENDPOINT).
	Endpoint string
	// Token is the access token sent as "Authorization: Bearer" to the Hub
	// (HF_TOKEN, or the legacy HUGGING_FACE_HUB_TOKEN). When empty, the token
	// file at TokenPath is used, as `hf auth login` writes it.
	Token string
	// TokenPath is the token file (HF_TOKEN_PATH, default $HF_HOME/token).
	TokenPath string
	// Home is huggingface_hub's home folder (HF_HOME, default
	// $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface).
	Home string
	// Cache is the hub cache folder holding models--org--name folders
	// (HF_HUB_CACHE, or the legacy HUGGINGFACE_HUB_CACHE; default $HF_HOME/hub).
	Cache string
	// Offline forbids every network request: models come from the cache or
	// not at all (HF_HUB_OFFLINE, or TRANSFORMERS_OFFLINE, set to 1, true,
	// yes or on).
	Offline bool
	// EtagTimeout bounds each metadata request (HF_HUB_ETAG_TIMEOUT, seconds;
	// default 10).
	EtagTimeout time.Duration
	// DownloadTimeout is how long a download may receive nothing before it is
	// cut and resumed (HF_HUB_DOWNLOAD_TIMEOUT, seconds; default 10).
	DownloadTimeout time.Duration
}

// ConfigFromEnv reads the configuration the way huggingface_hub does, from
// getenv (os.Getenv in a program; a map lookup in a test). An unset or empty
// variable takes its default; "~" and $VARS in paths are expanded. It fails
// only on a malformed timeout.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	first := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	path := func(p string) string {
		if p == "~" || strings.HasPrefix(p, "~/") {
			home := getenv("HOME")
			if home == "" {
				home, _ = os.UserHomeDir()
			}
			p = filepath.Join(home, p[1:])
		}
		return os.Expand(p, getenv)
	}
	c := Config{
		Endpoint: strings.TrimRight(first("HF_ENDPOINT"), "/"),
		Token:    cleanToken(first("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")),
		Offline:  isTrue(first("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")),
	}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if h := first("HF_HOME"); h != "" {
		c.Home = path(h)
	} else {
		base := first("XDG_CACHE_HOME")
		if base == "" {
			base = "~/.cache"
		}
		c.Home = filepath.Join(path(base), "huggingface")
	}
	if p := first("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"); p != "" {
		c.Cache = path(p)
	} else {
		c.Cache = filepath.Join(c.Home, "hub")
	}
	if p := first("HF_TOKEN_PATH"); p != "" {
		c.TokenPath = path(p)
	} else {
		c.TokenPath = filepath.Join(c.Home, "token")
	}
	var err error
	if c.EtagTimeout, err = seconds(getenv, "HF_HUB_ETAG_TIMEOUT"); err != nil {
		return Config{}, err
	}
	if c.DownloadTimeout, err = seconds(getenv, "HF_HUB_DOWNLOAD_TIMEOUT"); err != nil {
		return Config{}, err
	}
	return c, nil
}

// seconds reads a positive number of seconds; unset is 10s, the
// huggingface_hub default of both timeouts.
func seconds(getenv func(string) string, name string) (time.Duration, error) {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return 10 * time.Second, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("hub: %s=%q: want a positive number of seconds", name, v)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// isTrue is huggingface_hub's reading of a boolean variable.
func isTrue(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

// cleanToken drops line breaks and surrounding space, as huggingface_hub
// does with a token from the environment or the token file.
func cleanToken(t string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(t))
}

// token is the token to send: Config.Token, else the token file's content,
// else "" (anonymous). A missing token file is not an error.
func (c Config) token() (string, error) {
	if c.Token != "" {
		return c.Token, nil
	}
	if c.TokenPath == "" {
		return "", nil
	}
	b, err := os.ReadFile(c.TokenPath)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hub: reading the token file: %w", err)
	}
	return cleanToken(string(b)), nil
}
