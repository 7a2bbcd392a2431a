package safetensors

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
)

// TestPrefault: progress climbs to the total of the files' data, ending
// exactly there, and a cancelled context stops the read.
func TestPrefault(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 3*prefaultChunk+123)
	mustWrite(t, filepath.Join(dir, SingleFile), []WriteTensor{{Name: "w", DType: "U8", Shape: []int{len(data)}, Data: data}}, nil)
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var calls []int64
	if err := m.Prefault(context.Background(), func(done, total int64) {
		if total != m.Bytes() || done > total {
			t.Fatalf("progress %d of %d, model holds %d", done, total, m.Bytes())
		}
		calls = append(calls, done)
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 4 || calls[len(calls)-1] != m.Bytes() || m.Bytes() < int64(len(data)) {
		t.Fatalf("progress %v, total %d", calls, m.Bytes())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := m.Prefault(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled prefault: %v", err)
	}
}
