package webui

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// static holds the page and its assets.
//
//go:embed static
var static embed.FS

// assetPrefix is the path under which the page's script and style sheet
// are served (index.html refers to them relative to /).
const assetPrefix = "/ui/"

// htmlType is the page's media type.
const htmlType = "text/html; charset=utf-8"

// contentType is the media type of an embedded file by its extension (not
// mime.TypeByExtension: the system's tables may differ), or "".
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return htmlType
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	return ""
}

// csp lets the page load and call only its own origin.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// file is one embedded file ready to serve.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// site is the embedded files by name (index.html, app.js, ...).
type site map[string]file

// load reads every file of fsys's static folder.
func load(fsys fs.FS) (site, error) {
	entries, err := fs.ReadDir(fsys, "static")
	if err != nil {
		return nil, fmt.Errorf("webui: reading the embedded files: %w", err)
	}
	s := site{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		ct := contentType(e.Name())
		if ct == "" {
			return nil, fmt.Errorf("webui: embedded file %s has no known content type", e.Name())
		}
		body, err := fs.ReadFile(fsys, "static/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("webui: reading %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(body)
		s[e.Name()] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	if _, ok := s["index.html"]; !ok {
		return nil, fmt.Errorf("webui: no index.html among the embedded files")
	}
	return s, nil
}

// Mount registers the chat page on r: GET / (index.html) and GET
// /ui/<file> (its script and style sheet); Fiber answers HEAD on both too.
// Register it after the API routes. The routes need no API key: the page
// sends the key the user gives it with each API call.
func Mount(r fiber.Router) {
	s, err := load(static)
	if err != nil {
		// The files are compiled in: this is a broken build, not input.
		panic(err)
	}
	r.Get("/", func(c *fiber.Ctx) error { return s.serve(c, "index.html") })
	r.Get(assetPrefix+":name", func(c *fiber.Ctx) error { return s.serve(c, c.Params("name")) })
}

// serve writes the file name, or 304 when the client's copy is current,
// or 404.
func (s site) serve(c *fiber.Ctx, name string) error {
	f, ok := s[name]
	if !ok || name == "index.html" && c.Path() != "/" {
		return fiber.NewError(fiber.StatusNotFound, "no such file: "+c.Path())
	}
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderETag, f.etag)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	if f.contentType == htmlType {
		c.Set(fiber.HeaderContentSecurityPolicy, csp)
		c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	}
	if matches(c.Get(fiber.HeaderIfNoneMatch), f.etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, f.contentType)
	return c.Send(f.body)
}

// matches reports whether an If-None-Match header names etag (or is *).
func matches(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}
