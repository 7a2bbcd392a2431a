// Package hub fetches models from the Hugging Face Hub into the cache that
// huggingface_hub (and so transformers, vLLM and the hf CLI) shares, so that
// `troupe serve org/name` works like `vllm serve org/name`: a model another
// tool already downloaded is found without any network, and what troupe
// downloads is found by those tools.
//
// It matches huggingface_hub's behaviour rather than inventing its own:
//
//   - Configuration comes from the same environment variables (HF_TOKEN,
//     HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE, HF_ENDPOINT and their legacy
//     names), read by ConfigFromEnv into a Config value; the package keeps no
//     global state.
//   - The cache layout is huggingface_hub's: models--org--name/blobs/<etag>,
//     snapshots/<commit>/<path> as relative symlinks into ../../blobs, and
//     refs/<revision> holding the commit hash. Partial downloads live in
//     blobs/<etag>.incomplete and are resumed with a Range request; blobs are
//     renamed into place only once complete (and, for LFS files, once their
//     sha256 matches the ETag). A lock file per blob under .locks/ keeps two
//     processes from writing the same partial file.
//   - The protocol is snapshot_download's: GET /api/models/{repo}/revision/{rev}
//     for the commit and file list, then per file a HEAD on
//     /{repo}/resolve/{commit}/{path} that follows only relative redirects
//     (renamed repositories) and reads X-Repo-Commit, X-Linked-Etag/ETag and
//     X-Linked-Size/Content-Length, and a GET of the redirect target (the
//     CDN, without the Authorization header, for LFS files).
//   - When the Hub cannot be reached, or answers with an error, a complete
//     cached snapshot of the revision is used instead; with HF_HUB_OFFLINE no
//     request is made at all.
//
// Unlike snapshot_download it fetches only the files troupe reads (see
// selectFiles), and it checks that a cached snapshot actually holds them
// before it answers offline. From a repository of GGUF files it fetches one
// model, as llama.cpp's -hf and Ollama's hf.co/ names do: org/name:QUANT
// picks the quantization (gguf.go), Q4_K_M by default, and
// Snapshot.Model is the file to serve.
package hub
