// Package hubtest runs a fake Hugging Face Hub on loopback for tests, as
// net/http/httptest runs a fake server: the parts of the Hub's protocol the
// hub package speaks, answered the way the Hub answers them, and nothing
// from the network.
//
// It serves GET /api/models/{repo}/revision/{rev} (commit and file list)
// and HEAD/GET /{repo}/resolve/{rev}/{path}: regular files directly with
// their git blob sha1 as ETag; LFS files (*.safetensors, *.gguf, *.bin) as a
// 302 to a separate "CDN" server with X-Linked-Etag (the sha256) and
// X-Linked-Size, the CDN honouring Range requests. Errors carry the Hub's
// X-Error-Code header: RepoNotFound (401 without a token, 404 with one, as
// the Hub hides private repositories), GatedRepo (401 without a token, 403
// with a token that has no access), RevisionNotFound, EntryNotFound. A
// renamed repository answers with a relative 307 to its new name. Every
// request is recorded, so tests can count them; faults (a body cut short
// once, corrupted content) are set per file.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Server is a fake Hub and its CDN.
type Server struct {
	// URL is the Hub's endpoint, for HF_ENDPOINT.
	URL string
	// CDNURL is where LFS files are redirected to.
	CDNURL string

	hub, cdn *httptest.Server

	mu      sync.Mutex
	repos   map[string]*repo
	moved   map[string]string
	blobs   map[string][]byte // sha256 -> content, for the CDN
	cuts    map[string]int    // sha256 -> bytes sent before the next GET is cut
	stalls  map[string]int    // sha256 -> bytes sent before the next GET stalls
	corrupt map[string]bool   // sha256 -> serve altered bytes
	reqs    []Request
}

// Request is one request the fake Hub or CDN received.
type Request struct {
	// Server is "hub" or "cdn".
	Server string
	Method string
	// Path is the escaped request path.
	Path string
	// Range is the Range header, if any.
	Range string
	// Auth is the Authorization header, if any.
	Auth string
}

type repo struct {
	id      string
	commit  string
	files   map[string][]byte
	gated   bool
	private bool
	token   string
}

// Option shapes a repository.
type Option func(*repo)

// Gated makes the repository gated: its file list is public, as on the
// Hub, but its files need token.
func Gated(token string) Option { return func(r *repo) { r.gated, r.token = true, token } }

// Private hides the repository from anyone without token.
func Private(token string) Option { return func(r *repo) { r.private, r.token = true, token } }

// New starts a fake Hub and CDN; Close stops them.
func New() *Server {
	s := &Server{repos: map[string]*repo{}, moved: map[string]string{}, blobs: map[string][]byte{},
		cuts: map[string]int{}, stalls: map[string]int{}, corrupt: map[string]bool{}}
	s.hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	s.cdn = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.URL, s.CDNURL = s.hub.URL, s.cdn.URL
	return s
}

// Close stops both servers.
func (s *Server) Close() {
	s.hub.Close()
	s.cdn.Close()
}

// AddRepo puts files at a new commit of repository id's main branch and
// returns the commit hash (derived from the contents). Adding to an
// existing id replaces main; earlier commits stay reachable by hash.
func (s *Server) AddRepo(id string, files map[string][]byte, opts ...Option) string {
	h := sha1.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		sum := sha256.Sum256(files[name])
		fmt.Fprintf(h, "%s %x\n", name, sum)
	}
	r := &repo{id: id, files: files, commit: hex.EncodeToString(h.Sum(nil))}
	for _, o := range opts {
		o(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, b := range files {
		sum := sha256.Sum256(b)
		s.blobs[hex.EncodeToString(sum[:])] = b
	}
	s.repos[id+"@main"] = r
	s.repos[id+"@"+r.commit] = r
	return r.commit
}

// Move renames repository from to to: requests for from are redirected.
func (s *Server) Move(from, to string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moved[from] = to
}

// CutOnce makes the next CDN download of content stop after n bytes (the
// connection is dropped mid-body).
func (s *Server) CutOnce(content []byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cuts[SHA256(content)] = n
}

// StallOnce makes the next CDN download of content send n bytes and then
// nothing, holding the connection open until the client gives up.
func (s *Server) StallOnce(content []byte, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalls[SHA256(content)] = n
}

// Corrupt makes the CDN serve content with one byte changed (same length).
func (s *Server) Corrupt(content []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt[SHA256(content)] = true
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// ResetRequests forgets the requests received so far.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

// SHA256 is the hex sha256 of b: an LFS file's ETag and blob name.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// GitBlobSHA1 is git's object id of b: a regular file's ETag and blob name.
func GitBlobSHA1(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// IsLFS reports whether the fake Hub stores a file in LFS: by extension,
// as the Hub's default .gitattributes does.
func IsLFS(name string) bool {
	switch path.Ext(name) {
	case ".safetensors", ".gguf", ".bin":
		return true
	}
	return false
}

func (s *Server) record(server string, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Server: server, Method: r.Method, Path: r.URL.EscapedPath(),
		Range: r.Header.Get("Range"), Auth: r.Header.Get("Authorization")})
}

// hubError answers as the Hub does: status, X-Error-Code, X-Error-Message.
func hubError(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// lookup finds a repository revision, answering the Hub's errors itself
// (and the redirect of a renamed repository, to newPath(newID)) when it
// returns nil.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, id, rev string, newPath func(string) string) *repo {
	s.mu.Lock()
	to, moved := s.moved[id]
	rp, main := s.repos[id+"@"+rev], s.repos[id+"@main"]
	s.mu.Unlock()
	if moved {
		w.Header().Set("Location", newPath(to)) // relative, as the Hub sends it
		w.WriteHeader(http.StatusTemporaryRedirect)
		return nil
	}
	auth := r.Header.Get("Authorization")
	if main == nil || main.private && auth != "Bearer "+main.token {
		status := http.StatusUnauthorized
		if auth != "" {
			status = http.StatusNotFound
		}
		hubError(w, status, "RepoNotFound", "Repository not found")
		return nil
	}
	if rp == nil {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return nil
	}
	return rp
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.record("hub", r)
	segs := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, seg := range segs {
		v, err := url.PathUnescape(seg)
		if err != nil {
			http.Error(w, "bad path", http.StatusBadRequest)
			return
		}
		segs[i] = v
	}
	// GET /api/models/{org}/{name}/revision/{rev}
	if len(segs) == 6 && segs[0] == "api" && segs[1] == "models" && segs[4] == "revision" && r.Method == http.MethodGet {
		id, rev := segs[2]+"/"+segs[3], segs[5]
		rp := s.lookup(w, r, id, rev, func(to string) string {
			return "/api/models/" + to + "/revision/" + url.PathEscape(rev)
		})
		if rp == nil {
			return
		}
		type sibling struct {
			RFilename string `json:"rfilename"`
		}
		out := struct {
			ID       string    `json:"id"`
			SHA      string    `json:"sha"`
			Gated    any       `json:"gated"`
			Private  bool      `json:"private"`
			Siblings []sibling `json:"siblings"`
		}{ID: id, SHA: rp.commit, Gated: false, Private: rp.private}
		if rp.gated {
			out.Gated = "auto"
		}
		for _, name := range slices.Sorted(maps.Keys(rp.files)) {
			out.Siblings = append(out.Siblings, sibling{name})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
		return
	}
	// HEAD|GET /{org}/{name}/resolve/{rev}/{path...}
	if len(segs) >= 5 && segs[2] == "resolve" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		id, rev, file := segs[0]+"/"+segs[1], segs[3], strings.Join(segs[4:], "/")
		rest := strings.SplitN(r.URL.EscapedPath(), "/", 5)[4] // {rev}/{path...}, escaped
		rp := s.lookup(w, r, id, rev, func(to string) string { return "/" + to + "/resolve/" + rest })
		if rp == nil {
			return
		}
		auth := r.Header.Get("Authorization")
		if rp.gated && auth != "Bearer "+rp.token {
			msg := "Access to model " + id + " is restricted. You must have access to it and be authenticated to access it. Please log in."
			status := http.StatusUnauthorized
			if auth != "" {
				msg = "Access to model " + id + " is restricted and you are not in the authorized list. Visit the model page to ask for access."
				status = http.StatusForbidden
			}
			hubError(w, status, "GatedRepo", msg)
			return
		}
		w.Header().Set("X-Repo-Commit", rp.commit)
		content, ok := rp.files[file]
		if !ok {
			hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
			return
		}
		if IsLFS(file) {
			sha := SHA256(content)
			w.Header().Set("X-Linked-Etag", `"`+sha+`"`)
			w.Header().Set("X-Linked-Size", fmt.Sprint(len(content)))
			w.Header().Set("ETag", `"`+GitBlobSHA1([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:"+sha+"\n"))+`"`)
			w.Header().Set("Location", s.cdn.URL+"/"+sha+"?X-Signature=fake")
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusFound)
			return
		}
		w.Header().Set("ETag", `"`+GitBlobSHA1(content)+`"`)
		http.ServeContent(w, r, path.Base(file), time.Time{}, bytes.NewReader(content))
		return
	}
	hubError(w, http.StatusNotFound, "", "Not found")
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.record("cdn", r)
	sha := strings.TrimPrefix(r.URL.Path, "/")
	s.mu.Lock()
	content, ok := s.blobs[sha]
	cut, cutting := s.cuts[sha]
	stall, stalling := s.stalls[sha]
	if r.Method == http.MethodGet {
		delete(s.cuts, sha)
		delete(s.stalls, sha)
	}
	bad := s.corrupt[sha]
	s.mu.Unlock()
	if !ok || r.URL.Query().Get("X-Signature") == "" {
		http.Error(w, "AccessDenied", http.StatusForbidden)
		return
	}
	if bad && len(content) > 0 {
		content = slices.Clone(content)
		content[len(content)/2] ^= 0xff
	}
	w.Header().Set("ETag", `"`+sha+`"`)
	if (cutting || stalling) && r.Method == http.MethodGet {
		w.Header().Set("Content-Length", fmt.Sprint(len(content)))
		w.WriteHeader(http.StatusOK)
		w.Write(content[:min(cut+stall, len(content))])
		w.(http.Flusher).Flush()
		if stalling {
			<-r.Context().Done() // silent until the client hangs up
		}
		panic(http.ErrAbortHandler) // drop the connection mid-body
	}
	http.ServeContent(w, r, sha, time.Time{}, bytes.NewReader(content))
}
