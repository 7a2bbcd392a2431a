package mmap

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestMap(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"small", []byte("GGUF\x03\x00\x00\x00")},
		{"pages", bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7}, 3000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b, release, err := Map(f, int64(len(tc.data)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, tc.data) {
				t.Errorf("mapped %d bytes differ from the file's %d", len(b), len(tc.data))
			}
			DropPages(b) // the pages come back from the file when touched
			if !bytes.Equal(b, tc.data) {
				t.Errorf("after DropPages the bytes differ from the file")
			}
			if err := release(); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
}

func TestMapNegativeSize(t *testing.T) {
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, err := Map(f, -1); err == nil {
		t.Fatal("Map with a negative size succeeded")
	}
}
