package safetensors

import (
	"context"
	"fmt"
	"runtime"
)

// prefaultChunk is how many bytes Prefault reads between progress reports
// and cancellation checks.
const prefaultChunk = 8 << 20

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
	total := m.Bytes()
	var done int64
	var sink byte
	for _, f := range m.files {
		for off := 0; off < len(f.body); off += prefaultChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			end := min(off+prefaultChunk, len(f.body))
			for i := off; i < end; i += 4096 {
				sink ^= f.body[i]
			}
			done += int64(end - off)
			if progress != nil {
				progress(done, total)
			}
		}
	}
	if progress != nil && total == 0 {
		progress(0, 0)
	}
	// Without a use of sink the compiler drops the loads, and with them the
	// page faults this function exists for.
	runtime.KeepAlive(sink)
	return nil
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
