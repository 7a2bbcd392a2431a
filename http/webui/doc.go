// Package webui is the chat page troupe serves at /: a small built-in web
// UI in the spirit of llama-server's, for trying the served model from a
// browser without installing a client.
//
// It is shaped to stay out of the way of everything else:
//
//   - Three static files (index.html, app.js, app.css) in plain modern
//     JavaScript and CSS, embedded with go:embed: no framework, no build
//     step, nothing fetched from another host. The page's Content Security
//     Policy allows only its own origin, so a later edit that pulls in an
//     outside script or style fails visibly in the browser (and a test
//     looks for absolute URLs in the embedded files).
//   - The page is a client of the public API only: it streams
//     /v1/chat/completions (stream_options.include_usage, reasoning_content
//     deltas) and reads /v1/models, with the same Authorization: Bearer key
//     any client sends. So the page itself needs no key and is served
//     outside the auth middleware, while every call it makes is checked as
//     usual; the key the user types is kept in the browser's localStorage.
//   - Mount registers two GET routes, / and /ui/<file>, which collide with
//     no API route; the server mounts them after its API routes.
//
// The files are not fingerprinted, so every response carries
// Cache-Control: no-cache and a strong ETag of its content: a browser
// revalidates (304 when unchanged) and never runs a stale script after an
// upgrade.
package webui
