package mmap

import (
	"context"
	"runtime"
)

// prefaultChunk is how many bytes Prefault reads between progress reports
// (and checks of ctx).
const prefaultChunk = 8 << 20

// Prefault reads one byte of every 4 KiB page of each region, so that a
// mapped file's pages are in memory before a model is built from them (a
// slow disk is paid for at load, not by the first request). It reports the
// bytes read so far and their total after each chunk of 8 MiB (once with
// 0, 0 when there is nothing to read), and stops when ctx is done.
func Prefault(ctx context.Context, regions [][]byte, progress func(done, total int64)) error {
	var total, done int64
	for _, r := range regions {
		total += int64(len(r))
	}
	var sink byte
	for _, r := range regions {
		for off := 0; off < len(r); off += prefaultChunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			end := min(off+prefaultChunk, len(r))
			for i := off; i < end; i += 4096 {
				sink ^= r[i]
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
