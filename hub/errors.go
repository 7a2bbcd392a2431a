package hub

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Errors a caller can tell apart with errors.Is. Each comes wrapped in a
// message that names the repository and says what to do.
var (
	// ErrRepoNotFound: the repository does not exist, or is private and the
	// token (if any) gives no access. The Hub answers both the same way.
	ErrRepoNotFound = errors.New("repository not found")
	// ErrGated: the repository is gated and the token is missing or its
	// account has not accepted the model's terms.
	ErrGated = errors.New("gated repository")
	// ErrUnauthorized: the token was refused.
	ErrUnauthorized = errors.New("token refused")
	// ErrRevisionNotFound: the repository exists but the branch, tag or
	// commit does not.
	ErrRevisionNotFound = errors.New("revision not found")
	// ErrEntryNotFound: a file the revision lists could not be found.
	ErrEntryNotFound = errors.New("file not found")
	// ErrNotCached: offline (or the Hub unreachable) and the cache does not
	// hold what the model needs.
	ErrNotCached = errors.New("not in the cache")
	// ErrUnreachable: no answer from the Hub (DNS, connection, TLS, timeout).
	ErrUnreachable = errors.New("hub unreachable")
	// ErrChecksum: a downloaded file's sha256 differs from the one the Hub
	// announced.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrUnsupported: the repository holds no weights troupe can serve yet
	// (PyTorch .bin only, or no GGUF model of the quantization asked for).
	ErrUnsupported = errors.New("unsupported repository")
	// ErrNotHub: the server answered, but not as the Hub does (no commit or
	// ETag header): usually a proxy, a captive portal or a wrong HF_ENDPOINT.
	ErrNotHub = errors.New("not a Hugging Face Hub answer")
)

// statusError turns a Hub error response into an error naming the
// repository and the remedy, from the status and the X-Error-Code and
// X-Error-Message headers huggingface_hub reads. It reads (a bounded part
// of) the body only when there is no X-Error-Message.
func (c *Client) statusError(resp *http.Response, repo, rev, what string) error {
	code := resp.Header.Get("X-Error-Code")
	msg := resp.Header.Get("X-Error-Message")
	if msg == "" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		msg = strings.TrimSpace(string(b))
		if strings.HasPrefix(msg, "<") { // an HTML page says nothing useful here
			msg = ""
		}
	}
	detail := fmt.Sprintf("HTTP %d", resp.StatusCode)
	if msg != "" {
		detail += ": " + msg
	}
	page := c.cfg.Endpoint + "/" + repo
	tokenHint := "set HF_TOKEN to an access token of an account that can read it (" + c.cfg.Endpoint + "/settings/tokens)"
	if c.hasToken {
		tokenHint = "check that the token in HF_TOKEN belongs to an account that can read it"
	}
	switch {
	case code == "RevisionNotFound":
		return fmt.Errorf("hub: %s has no revision %q (%s): %w", repo, rev, detail, ErrRevisionNotFound)
	case code == "EntryNotFound":
		return fmt.Errorf("hub: %s@%s: %s not found (%s): %w", repo, rev, what, detail, ErrEntryNotFound)
	case code == "GatedRepo":
		return fmt.Errorf("hub: %s is a gated model: accept its terms at %s while logged in, and %s (%s): %w", repo, page, tokenHint, detail, ErrGated)
	case msg == "Invalid credentials in Authorization header" || resp.StatusCode == http.StatusUnauthorized && c.hasToken && code == "":
		return fmt.Errorf("hub: %s: the Hub refused the token in HF_TOKEN (%s): %w", repo, detail, ErrUnauthorized)
	case code == "RepoNotFound" || resp.StatusCode == http.StatusUnauthorized:
		return fmt.Errorf("hub: %s: repository not found at %s (%s); check the name, and if it is private or gated, %s and accept its terms at %s: %w",
			repo, c.cfg.Endpoint, detail, tokenHint, page, ErrRepoNotFound)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("hub: %s: access denied (%s); if the model is gated, accept its terms at %s and %s: %w", repo, detail, page, tokenHint, ErrGated)
	case resp.StatusCode == http.StatusNotFound:
		return fmt.Errorf("hub: %s@%s: %s not found (%s): %w", repo, rev, what, detail, ErrRepoNotFound)
	}
	return fmt.Errorf("hub: %s: %s: %s", repo, what, detail)
}

// unreachable wraps a transport error with the offline hint.
func (c *Client) unreachable(err error) error {
	return fmt.Errorf("hub: cannot reach %s (%v); check the network or proxy, or set HF_HUB_OFFLINE=1 to use only models already in the cache (%s): %w",
		c.cfg.Endpoint, err, c.cfg.Cache, ErrUnreachable)
}
