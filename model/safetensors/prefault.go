package safetensors

import (
	"context"
	"fmt"

	"github.com/troupe-ai/troupe/internal/mmap"
)

// Bytes is the size of the tensors' data in every file of the model.
func (m *Model) Bytes() int64 {
	var n int64
	for _, f := range m.files {
		n += int64(len(f.body))
	}
	return n
}

// Prefault reads every page of the mapped files once, so the disk is read
// at load time (where progress can be shown) rather than on the first
// request, as llama.cpp's loader does. progress, when not nil, is called
// with the bytes read so far and the total, at least once at the end. It
// stops early, returning ctx's error, when ctx is done.
func (m *Model) Prefault(ctx context.Context, progress func(done, total int64)) error {
	if m.closed {
		return fmt.Errorf("safetensors: %s: prefault: model is closed", m.where)
	}
	bodies := make([][]byte, len(m.files))
	for i, f := range m.files {
		bodies[i] = f.body
	}
	return mmap.Prefault(ctx, bodies, progress)
}

// DropPages says that the caller has copied data (a Tensor's Data, or part
// of it) and will not read it again soon: the mapped pages wholly inside it
// leave the process's resident set, so a loader that copies the weights
// elsewhere does not hold both copies at once. The data stays valid; reading
// it again faults the pages back in from the page cache.
func (m *Model) DropPages(data []byte) {
	if !m.closed {
		dropPages(data)
	}
}
