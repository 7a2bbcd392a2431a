package hub

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// DefaultRevision is the branch fetched when no revision is given.
const DefaultRevision = "main"

var (
	// repoPart is one side of "org/name", as huggingface_hub's
	// validate_repo_id accepts it: word characters, '-' and '.', starting
	// and ending with a word character.
	repoPart = regexp.MustCompile(`^\w([\w.-]*\w)?$`)
	// commitHash is a full git commit id, which names an immutable snapshot.
	commitHash = regexp.MustCompile(`^[0-9a-f]{40}$`)
	// safeEtag is an ETag usable as a file name in blobs/: the Hub's are
	// git sha1 or sha256 hex digests.
	safeEtag = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z_.+=-]*$`)
)

// IsRepoID reports whether s has the form of a Hub model repository id,
// "org/name" or a bare "name", as huggingface_hub validates it: at most 96
// characters, no "--" or "..", not ending in ".git".
func IsRepoID(s string) bool {
	if len(s) == 0 || len(s) > 96 || strings.Contains(s, "--") || strings.Contains(s, "..") || strings.HasSuffix(s, ".git") {
		return false
	}
	parts := strings.Split(s, "/")
	if len(parts) > 2 {
		return false
	}
	for _, p := range parts {
		if !repoPart.MatchString(p) {
			return false
		}
	}
	return true
}

// LooksLikeRepoID reports whether a command-line model argument names a Hub
// repository rather than a local path: "org/name" or "org/name:QUANT" (a
// GGUF model, ParseModelRef), with no leading "./", "/" or "~". A bare
// "name" is taken for a local folder.
func LooksLikeRepoID(s string) bool {
	repo, _, ok := ParseModelRef(s)
	return ok && strings.Count(repo, "/") == 1
}

// IsCommit reports whether a revision is a full commit hash.
func IsCommit(rev string) bool { return commitHash.MatchString(rev) }

// checkRevision refuses a revision that cannot name refs/<revision> inside
// the cache: empty path segments, "." or "..", a backslash.
func checkRevision(rev string) error {
	if rev == "" || strings.ContainsAny(rev, "\\\x00") || strings.HasPrefix(rev, "/") {
		return fmt.Errorf("hub: invalid revision %q", rev)
	}
	for _, seg := range strings.Split(rev, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("hub: invalid revision %q", rev)
		}
	}
	return nil
}

// checkRepoPath refuses a file path from the Hub (or from an index it
// served) that would leave the snapshot folder: it must be relative, with no
// empty, "." or ".." segments.
func checkRepoPath(p string) error {
	if p == "" || strings.ContainsAny(p, "\\\x00") || strings.HasPrefix(p, "/") {
		return fmt.Errorf("hub: unsafe file path %q in the repository", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("hub: unsafe file path %q in the repository", p)
		}
	}
	return nil
}

// folderName is the repository's folder in the cache: "models--org--name".
func folderName(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// normalizeEtag strips the weak marker and the quotes of an ETag header, as
// huggingface_hub does before it names a blob after it.
func normalizeEtag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

// isSHA256 reports whether an ETag is an LFS object id: the sha256 of the
// content, which the download is checked against.
func isSHA256(etag string) bool {
	if len(etag) != 64 {
		return false
	}
	for _, c := range etag {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// resolveURL is the address of one file at one revision:
// {endpoint}/{repo}/resolve/{revision}/{path}, the revision escaped whole
// (so "refs/pr/1" stays one segment) and the path segment by segment.
func resolveURL(endpoint, repo, rev, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return endpoint + "/" + repo + "/resolve/" + url.PathEscape(rev) + "/" + strings.Join(segs, "/")
}

// revisionURL is the API address of a revision's commit and file list.
func revisionURL(endpoint, repo, rev string) string {
	return endpoint + "/api/models/" + repo + "/revision/" + url.PathEscape(rev)
}
