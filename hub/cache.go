package hub

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// store is one repository's folder in the hub cache, laid out as
// huggingface_hub lays it out:
//
//	models--org--name/
//	  blobs/<etag>                      file contents, named by ETag
//	  blobs/<etag>.incomplete           a download in progress
//	  snapshots/<commit>/<path>         relative symlinks to ../../blobs/<etag>
//	  refs/<revision>                   the commit hash a branch or tag was at
//
// and the cache's .locks/models--org--name/<etag>.lock beside it.
type store struct {
	cache string // the hub cache folder
	repo  string // org/name
	dir   string // cache/models--org--name
}

func newStore(cache, repo string) store {
	return store{cache: cache, repo: repo, dir: filepath.Join(cache, folderName(repo))}
}

func (s store) blob(etag string) string { return filepath.Join(s.dir, "blobs", etag) }

func (s store) snapshot(commit string) string { return filepath.Join(s.dir, "snapshots", commit) }

func (s store) pointer(commit, path string) string {
	return filepath.Join(s.snapshot(commit), filepath.FromSlash(path))
}

func (s store) lock(etag string) string {
	return filepath.Join(s.cache, ".locks", folderName(s.repo), etag+".lock")
}

// readRef is the commit refs/<rev> records, or "" when there is none.
func (s store) readRef(rev string) (string, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "refs", filepath.FromSlash(rev)))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("hub: reading the cached ref: %w", err)
	}
	commit := strings.TrimSpace(string(b))
	if !IsCommit(commit) {
		return "", fmt.Errorf("hub: %s holds %q, not a commit hash", filepath.Join(s.dir, "refs", rev), commit)
	}
	return commit, nil
}

// writeRef records that rev is at commit, unless rev is the commit itself or
// the ref already says so (a read-only cache stays usable then). The file is
// replaced atomically, so a concurrent reader never sees half a hash.
func (s store) writeRef(rev, commit string) error {
	if rev == commit {
		return nil
	}
	if old, err := s.readRef(rev); err == nil && old == commit {
		return nil
	}
	path := filepath.Join(s.dir, "refs", filepath.FromSlash(rev))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	tmp := path + "." + randomSuffix() + ".tmp"
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// link points the snapshot path at the blob with a relative symlink
// (../../blobs/<etag>, one more ../ per folder level of the path), so the
// cache still works after it is moved. An existing pointer is replaced
// atomically.
func (s store) link(blob, pointer string) error {
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	absBlob, err := filepath.Abs(blob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	absDir, err := filepath.Abs(filepath.Dir(pointer))
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	rel, err := filepath.Rel(absDir, absBlob)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	tmp := pointer + "." + randomSuffix() + ".tmp"
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("hub: linking the snapshot to its blob: %w", err)
	}
	if err := os.Rename(tmp, pointer); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub: %w", err)
	}
	return nil
}

// isFile reports whether path (following symlinks) is a regular file: a
// snapshot pointer whose blob is really there.
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func randomSuffix() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
