package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxInfoBytes bounds the revision's JSON answer (its file list).
const maxInfoBytes = 32 << 20

// Options shape a Client beyond its Config.
type Options struct {
	// HTTPClient supplies the transport (default http.DefaultTransport); the
	// Client sets its own redirect policy on copies of it.
	HTTPClient *http.Client
	// Progress hears about each download (default: none).
	Progress Progress
	// Logger receives warnings, such as a cached snapshot used because the
	// Hub could not be reached (default: discarded).
	Logger *slog.Logger
	// Retries is how many times in a row a broken download is resumed
	// without receiving anything before it fails (default 5).
	Retries int
	// RetryWait is the first pause before a retry, doubling up to 10s
	// (default 1s).
	RetryWait time.Duration
	// UserAgent names the client to the Hub (default "troupe").
	UserAgent string
}

// Client fetches model snapshots into the hub cache. It is safe for
// concurrent use; it holds no state beyond its configuration.
type Client struct {
	cfg       Config
	follow    *http.Client // API calls and downloads: redirects followed
	noFollow  *http.Client // metadata HEADs: redirects read, not followed
	token     string
	hasToken  bool
	progress  Progress
	log       *slog.Logger
	retries   int
	retryWait time.Duration
	ua        string
}

// New returns a Client for cfg. It fails when the token file cannot be
// read.
func New(cfg Config, opt Options) (*Client, error) {
	if cfg.Endpoint == "" || cfg.Cache == "" {
		return nil, errors.New("hub: the configuration needs an endpoint and a cache folder (use ConfigFromEnv)")
	}
	token, err := cfg.token()
	if err != nil {
		return nil, err
	}
	base := opt.HTTPClient
	if base == nil {
		base = &http.Client{}
	}
	follow, noFollow := *base, *base
	follow.CheckRedirect = nil
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{cfg: cfg, follow: &follow, noFollow: &noFollow, token: token, hasToken: token != "",
		progress: opt.Progress, log: opt.Logger, retries: opt.Retries, retryWait: opt.RetryWait, ua: opt.UserAgent}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.retries <= 0 {
		c.retries = 5
	}
	if c.retryWait <= 0 {
		c.retryWait = time.Second
	}
	if c.ua == "" {
		c.ua = "troupe"
	}
	if c.cfg.EtagTimeout <= 0 {
		c.cfg.EtagTimeout = 10 * time.Second
	}
	if c.cfg.DownloadTimeout <= 0 {
		c.cfg.DownloadTimeout = 10 * time.Second
	}
	return c, nil
}

// Snapshot is one revision of a repository in the cache.
type Snapshot struct {
	// Repo is the repository id, org/name.
	Repo string
	// Revision is what was asked for: a branch, tag or commit.
	Revision string
	// Commit is the commit hash the revision resolved to.
	Commit string
	// Dir is the snapshot folder, cache/models--org--name/snapshots/<commit>.
	Dir string
	// Model is what to serve: Dir for a Transformers model, the (first)
	// file of the GGUF model for a GGUF repository.
	Model string
	// Files are the repository paths fetched or found present in Dir (not
	// listed when FromCache: Dir was checked to hold what troupe needs).
	Files []string
	// Downloaded counts the bytes fetched by this call (0 when everything
	// was cached).
	Downloaded int64
	// FromCache is set when the Hub was not asked, or could not be asked,
	// for the revision: offline, or a cached snapshot used after an error.
	FromCache bool
}

// Pull makes the files troupe needs from revision ("" means main) of the
// model ref names (org/name, or org/name:QUANT for one GGUF model of a
// repository of GGUF files, ParseModelRef) present in the cache and
// returns the snapshot. Files already cached are
// not requested again; with a commit hash for revision and a complete cached
// snapshot, nothing is requested at all. Offline (Config.Offline), only the
// cache is read. When the Hub cannot be reached or answers with an error, a
// complete cached snapshot of the revision is used, as huggingface_hub does;
// otherwise the error says what went wrong and what to do.
func (c *Client) Pull(ctx context.Context, ref, revision string) (Snapshot, error) {
	repo, quant, ok := ParseModelRef(ref)
	if !ok {
		return Snapshot{}, fmt.Errorf("hub: %q is not a repository id (org/name, or org/name:QUANT for a GGUF model)", ref)
	}
	if revision == "" {
		revision = DefaultRevision
	}
	if err := checkRevision(revision); err != nil {
		return Snapshot{}, err
	}
	st := newStore(c.cfg.Cache, repo)
	if c.cfg.Offline {
		return c.fromCache(st, revision, quant, nil)
	}
	if IsCommit(revision) {
		if snap, err := c.fromCache(st, revision, quant, nil); err == nil {
			return snap, nil // a commit never changes: nothing to ask
		}
	}
	info, err := c.revisionInfo(ctx, repo, revision)
	if err != nil {
		if errors.Is(err, ErrRevisionNotFound) || ctx.Err() != nil {
			return Snapshot{}, err
		}
		snap, cerr := c.fromCache(st, revision, quant, err)
		if cerr != nil {
			return Snapshot{}, err
		}
		c.log.Warn("hub: using the cached snapshot; the Hub could not be asked", "repo", repo, "revision", revision, "commit", snap.Commit, "err", err)
		return snap, nil
	}
	p, err := selectFiles(repo, info.files, quant)
	if err != nil {
		return Snapshot{}, err
	}
	if err := st.writeRef(revision, info.commit); err != nil {
		c.log.Warn("hub: could not record the revision's commit in the cache", "err", err)
	}
	snap := Snapshot{Repo: repo, Revision: revision, Commit: info.commit, Dir: st.snapshot(info.commit)}
	snap.Model = snap.Dir
	if p.model != "" {
		snap.Model = filepath.Join(snap.Dir, filepath.FromSlash(p.model))
	}
	get := func(files []string) error {
		for _, f := range files {
			n, err := c.fetch(ctx, st, info.commit, f)
			snap.Downloaded += n
			if err != nil {
				return err
			}
			snap.Files = append(snap.Files, f)
		}
		return nil
	}
	if err := get(p.files); err != nil {
		return Snapshot{}, err
	}
	if p.index != "" {
		shards, err := readShards(st.pointer(info.commit, p.index))
		if err != nil {
			return Snapshot{}, err
		}
		for _, s := range shards {
			if !slices.Contains(info.files, s) {
				return Snapshot{}, fmt.Errorf("hub: %s@%s: %s names the shard %s, which the repository does not have", repo, revision, p.index, s)
			}
		}
		if err := get(shards); err != nil {
			return Snapshot{}, err
		}
	}
	return snap, nil
}

// fromCache finds revision's snapshot in the cache and checks that it holds
// everything troupe needs. cause is why the Hub was not used (nil offline).
func (c *Client) fromCache(st store, revision, quant string, cause error) (Snapshot, error) {
	why := "HF_HUB_OFFLINE is set, so nothing is downloaded: unset it, or run `troupe pull " + st.repo + "` where the Hub can be reached"
	if cause != nil {
		why = cause.Error()
	}
	commit := revision
	if !IsCommit(revision) {
		var err error
		if commit, err = st.readRef(revision); err != nil {
			return Snapshot{}, err
		}
		if commit == "" {
			return Snapshot{}, fmt.Errorf("hub: %s@%s is not in the cache %s (no refs/%s); %s: %w", st.repo, revision, c.cfg.Cache, revision, why, ErrNotCached)
		}
	}
	dir := st.snapshot(commit)
	if _, err := os.Stat(dir); err != nil {
		return Snapshot{}, fmt.Errorf("hub: %s@%s (commit %s) is not in the cache %s; %s: %w", st.repo, revision, commit, c.cfg.Cache, why, ErrNotCached)
	}
	snap := Snapshot{Repo: st.repo, Revision: revision, Commit: commit, Dir: dir, Model: dir, FromCache: true}
	var missing []string
	if quant == "" {
		var err error
		if missing, err = missingFromSnapshot(dir); err != nil {
			return Snapshot{}, err
		}
	}
	if quant != "" || len(missing) > 0 && !isFile(filepath.Join(dir, "config.json")) {
		// a GGUF model: the one asked for, or the only (or default) one cached
		set, err := cachedGGUF(st.repo, dir, quant)
		if err == nil {
			snap.Model = filepath.Join(dir, filepath.FromSlash(set.files[0]))
			return snap, nil
		}
		if quant != "" {
			return Snapshot{}, fmt.Errorf("hub: %s@%s (commit %s) in the cache %s: %v; %s: %w", st.repo, revision, commit, c.cfg.Cache, err, why, ErrNotCached)
		}
	}
	if len(missing) > 0 {
		return Snapshot{}, fmt.Errorf("hub: %s@%s (commit %s) is not complete in the cache %s: missing %s; %s: %w",
			st.repo, revision, commit, c.cfg.Cache, listSome(missing), why, ErrNotCached)
	}
	return snap, nil
}

// info is a revision's commit and file list.
type info struct {
	commit string
	files  []string
}

// revisionInfo asks the API for the revision's commit and files.
func (c *Client) revisionInfo(ctx context.Context, repo, revision string) (info, error) {
	ctx, cancel := context.WithTimeout(ctx, 6*c.cfg.EtagTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, revisionURL(c.cfg.Endpoint, repo, revision), nil)
	if err != nil {
		return info{}, fmt.Errorf("hub: %w", err)
	}
	c.headers(req, true)
	resp, err := c.follow.Do(req)
	if err != nil {
		return info{}, c.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info{}, c.statusError(resp, repo, revision, "revision "+revision)
	}
	var body struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			RFilename string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxInfoBytes)).Decode(&body); err != nil {
		if ctx.Err() != nil {
			return info{}, c.transportError(ctx, err)
		}
		return info{}, fmt.Errorf("hub: %s@%s: unreadable answer from %s: %v: %w", repo, revision, c.cfg.Endpoint, err, ErrNotHub)
	}
	if !IsCommit(body.SHA) {
		return info{}, fmt.Errorf("hub: %s@%s: the answer from %s has no commit hash: %w", repo, revision, c.cfg.Endpoint, ErrNotHub)
	}
	in := info{commit: body.SHA}
	for _, s := range body.Siblings {
		in.files = append(in.files, s.RFilename)
	}
	return in, nil
}

// headers sets the headers of a request; the token goes only to the Hub's
// own host (a CDN's signed URL needs none, and must not see it).
func (c *Client) headers(req *http.Request, auth bool) {
	req.Header.Set("User-Agent", c.ua)
	if auth && c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// sameHost reports whether u is on the endpoint's host.
func (c *Client) sameHost(u *url.URL) bool {
	e, err := url.Parse(c.cfg.Endpoint)
	return err == nil && strings.EqualFold(e.Host, u.Host)
}

// transportError classifies a failed request: the caller's own
// cancellation stays as it is; anything else is the Hub being unreachable.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return fmt.Errorf("hub: %w", err)
	}
	return c.unreachable(err)
}

// fileMeta is what the HEAD on a file's resolve URL tells.
type fileMeta struct {
	repo, path string
	commit     string
	etag       string
	size       int64
	location   *url.URL // where to GET it
}

// head reads a file's metadata: a HEAD on its resolve URL that follows
// relative redirects (a renamed repository) and stops at an absolute one
// (the CDN), whose headers carry the LFS ETag and size.
func (c *Client) head(ctx context.Context, repo, commit, path string) (fileMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.EtagTimeout)
	defer cancel()
	loc, err := url.Parse(resolveURL(c.cfg.Endpoint, repo, commit, path))
	if err != nil {
		return fileMeta{}, fmt.Errorf("hub: %w", err)
	}
	for hops := 0; ; hops++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, loc.String(), nil)
		if err != nil {
			return fileMeta{}, fmt.Errorf("hub: %w", err)
		}
		c.headers(req, c.sameHost(loc))
		req.Header.Set("Accept-Encoding", "identity") // the real size, not a compressed one
		resp, err := c.noFollow.Do(req)
		if err != nil {
			return fileMeta{}, c.transportError(ctx, err)
		}
		resp.Body.Close()
		if resp.StatusCode >= 300 && resp.StatusCode < 400 {
			target, err := url.Parse(resp.Header.Get("Location"))
			if err != nil || resp.Header.Get("Location") == "" {
				return fileMeta{}, fmt.Errorf("hub: %s: %s: redirect without a usable Location: %w", repo, path, ErrNotHub)
			}
			relative := target.Host == ""
			target = loc.ResolveReference(target)
			if relative {
				if hops >= 10 {
					return fileMeta{}, fmt.Errorf("hub: %s: %s: too many redirects", repo, path)
				}
				loc = target
				continue
			}
			loc = target // the CDN: the metadata is on this answer
		} else if resp.StatusCode != http.StatusOK {
			return fileMeta{}, c.statusError(resp, repo, commit, path)
		}
		m := fileMeta{repo: repo, path: path, location: loc, commit: resp.Header.Get("X-Repo-Commit")}
		m.etag = normalizeEtag(resp.Header.Get("X-Linked-Etag"))
		if m.etag == "" {
			m.etag = normalizeEtag(resp.Header.Get("ETag"))
		}
		sz := resp.Header.Get("X-Linked-Size")
		if sz == "" {
			sz = resp.Header.Get("Content-Length")
		}
		m.size, err = strconv.ParseInt(sz, 10, 64)
		switch {
		case m.commit == "":
			return fileMeta{}, fmt.Errorf("hub: %s: %s: no X-Repo-Commit header from %s; check HF_ENDPOINT and any proxy: %w", repo, path, c.cfg.Endpoint, ErrNotHub)
		case m.etag == "" || !safeEtag.MatchString(m.etag):
			return fileMeta{}, fmt.Errorf("hub: %s: %s: no usable ETag from %s (%q): %w", repo, path, c.cfg.Endpoint, m.etag, ErrNotHub)
		case err != nil || m.size < 0:
			return fileMeta{}, fmt.Errorf("hub: %s: %s: no file size from %s: %w", repo, path, c.cfg.Endpoint, ErrNotHub)
		}
		return m, nil
	}
}
