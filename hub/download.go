package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// errStalled cuts a download that received nothing for DownloadTimeout.
var errStalled = errors.New("no data received")

// fetch makes one file of a commit present in the snapshot and returns the
// bytes it downloaded. A pointer already in the snapshot costs no request;
// a blob already in blobs/ (shared with another commit) costs one HEAD.
func (c *Client) fetch(ctx context.Context, st store, commit, path string) (int64, error) {
	if err := checkRepoPath(path); err != nil {
		return 0, err
	}
	pointer := st.pointer(commit, path)
	if isFile(pointer) {
		return 0, nil
	}
	m, err := c.head(ctx, st.repo, commit, path)
	if err != nil {
		return 0, err
	}
	blob := st.blob(m.etag)
	var n int64
	if !isFile(blob) {
		unlock, err := lockFile(ctx, st.lock(m.etag))
		if err != nil {
			return 0, err
		}
		defer unlock()
		if !isFile(blob) { // another process may have finished it meanwhile
			if n, err = c.download(ctx, m, blob); err != nil {
				return n, err
			}
		}
	}
	return n, st.link(blob, pointer)
}

// download writes the file into blob: into blob.incomplete first, resuming
// what an earlier attempt left there with a Range request, then, once the
// size (and for an LFS file the sha256) is right, renamed into place. A
// broken transfer is resumed up to Retries times in a row without progress.
func (c *Client) download(ctx context.Context, m fileMeta, blob string) (got int64, err error) {
	partial := blob + ".incomplete"
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	have := st.Size()
	var sum hash.Hash
	if isSHA256(m.etag) {
		sum = sha256.New()
	}
	if have > m.size {
		have = 0
	}
	if err := f.Truncate(have); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if sum != nil && have > 0 { // the resumed part counts towards the checksum
		if _, err := io.Copy(sum, io.NewSectionReader(f, 0, have)); err != nil {
			return 0, fmt.Errorf("hub: reading the partial download: %w", err)
		}
	}
	if _, err := f.Seek(have, io.SeekStart); err != nil {
		return 0, fmt.Errorf("hub: %w", err)
	}
	if c.progress != nil {
		c.progress.Start(m.path, m.size, have)
		defer func() { c.progress.Finish(err) }()
	}
	restart := func() error {
		if c.progress != nil {
			c.progress.Add(-have)
		}
		have = 0
		if sum != nil {
			sum.Reset()
		}
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("hub: %w", err)
		}
		_, err := f.Seek(0, io.SeekStart)
		return err
	}
	buf := make([]byte, 256<<10)
	for failures := 0; have < m.size; {
		n, retry, err := c.transfer(ctx, m, f, sum, buf, have, restart)
		have += n
		got += n
		if err == nil {
			break
		}
		if !retry || ctx.Err() != nil {
			return got, err
		}
		if n > 0 {
			failures = 0
		}
		if failures++; failures > c.retries {
			return got, fmt.Errorf("hub: %s: %s: giving up after %d attempts: %w", m.repo, m.path, failures, err)
		}
		wait := min(c.retryWait<<(failures-1), 10*time.Second)
		c.log.Warn("hub: download interrupted; resuming", "file", m.path, "at", have, "of", m.size, "err", err, "wait", wait)
		select {
		case <-ctx.Done():
			return got, fmt.Errorf("hub: %s: %w", m.path, ctx.Err())
		case <-time.After(wait):
		}
	}
	if have != m.size {
		return got, fmt.Errorf("hub: %s: %s: received %d bytes, the Hub announced %d", m.repo, m.path, have, m.size)
	}
	if sum != nil {
		if got := hex.EncodeToString(sum.Sum(nil)); got != m.etag {
			f.Close()
			f = nil
			os.Remove(partial)
			return 0, fmt.Errorf("hub: %s: %s: the download's sha256 is %s but the Hub announced %s; it was discarded, run the command again (a proxy may be altering downloads): %w",
				m.repo, m.path, got, m.etag, ErrChecksum)
		}
	}
	if err := f.Sync(); err != nil {
		return got, fmt.Errorf("hub: %w", err)
	}
	if err := f.Close(); err != nil {
		f = nil
		return got, fmt.Errorf("hub: %w", err)
	}
	f = nil
	if err := os.Rename(partial, blob); err != nil {
		return got, fmt.Errorf("hub: %w", err)
	}
	return got, nil
}

// transfer makes one GET of the file from offset have, appending to f (and
// sum) what it receives, at most the announced size. It returns the bytes
// appended and whether a failure is worth retrying (network, 5xx, 408, 429,
// an answer for the wrong range) or final (other statuses, the disk).
func (c *Client) transfer(ctx context.Context, m fileMeta, f *os.File, sum hash.Hash, buf []byte, have int64, restart func() error) (n int64, retry bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(c.cfg.DownloadTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.location.String(), nil)
	if err != nil {
		return 0, false, fmt.Errorf("hub: %w", err)
	}
	c.headers(req, c.sameHost(m.location))
	req.Header.Set("Accept-Encoding", "identity") // byte offsets must be the file's
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.follow.Do(req)
	if err != nil {
		return 0, true, c.downloadError(ctx, m, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		if start, ok := rangeStart(resp.Header.Get("Content-Range")); !ok || start != have {
			if err := restart(); err != nil {
				return 0, false, err
			}
			return 0, true, fmt.Errorf("hub: %s: the server answered range %q for bytes=%d-", m.path, resp.Header.Get("Content-Range"), have)
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // the Range was ignored: start over
			if err := restart(); err != nil {
				return 0, false, err
			}
			have = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if err := restart(); err != nil {
			return 0, false, err
		}
		return 0, true, fmt.Errorf("hub: %s: the server refused to resume at byte %d", m.path, have)
	default:
		retry = resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests
		if !c.sameHost(resp.Request.URL) { // the CDN: the Hub's error codes do not apply
			return 0, retry, fmt.Errorf("hub: %s: %s: the download from %s answered HTTP %d", m.repo, m.path, resp.Request.URL.Host, resp.StatusCode)
		}
		return 0, retry, c.statusError(resp, m.repo, m.commit, m.path)
	}
	body := io.LimitReader(resp.Body, m.size-have+1)
	for {
		k, rerr := body.Read(buf)
		if k > 0 {
			if have+n+int64(k) > m.size {
				return n, false, fmt.Errorf("hub: %s: %s: the server sent more than the announced %d bytes", m.repo, m.path, m.size)
			}
			if _, werr := f.Write(buf[:k]); werr != nil {
				return n, false, fmt.Errorf("hub: writing %s: %w", m.path, werr)
			}
			if sum != nil {
				sum.Write(buf[:k])
			}
			if c.progress != nil {
				c.progress.Add(int64(k))
			}
			n += int64(k)
			stall.Reset(c.cfg.DownloadTimeout)
			// a cancelled caller stops here, even when this read brought the
			// rest of the file: the partial file stays for the next run
			if err := ctx.Err(); err != nil {
				return n, errors.Is(context.Cause(ctx), errStalled), c.downloadError(ctx, m, err)
			}
		}
		if rerr == io.EOF {
			if have+n < m.size {
				return n, true, fmt.Errorf("hub: %s: the connection ended at byte %d of %d", m.path, have+n, m.size)
			}
			return n, false, nil
		}
		if rerr != nil {
			return n, true, c.downloadError(ctx, m, rerr)
		}
	}
}

// downloadError names a failed transfer: a stall, the caller's
// cancellation, or the network.
func (c *Client) downloadError(ctx context.Context, m fileMeta, err error) error {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, errStalled):
		return fmt.Errorf("hub: %s: %s: nothing received for %s (HF_HUB_DOWNLOAD_TIMEOUT): %w", m.repo, m.path, c.cfg.DownloadTimeout, ErrUnreachable)
	case ctx.Err() != nil:
		return fmt.Errorf("hub: %s: %s: %w", m.repo, m.path, ctx.Err())
	}
	return fmt.Errorf("hub: %s: %s: %v: %w", m.repo, m.path, err, ErrUnreachable)
}

// rangeStart reads the first byte of a Content-Range "bytes a-b/n".
func rangeStart(h string) (int64, bool) {
	rest, ok := strings.CutPrefix(h, "bytes ")
	if !ok {
		return 0, false
	}
	a, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(a, 10, 64)
	return v, err == nil
}
