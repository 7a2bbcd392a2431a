package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"unicode/utf8"
)

// WriteTensor is one tensor to be written by Write.
type WriteTensor struct {
	Name string
	// DType is a safetensors dtype name. Readers of this package accept
	// "F32", "BF16" and "F16"; any other whole-byte dtype ("I64", "U8", ...)
	// is written too, so tools and tests can produce such files.
	DType string
	Shape []int
	Data  []byte // little-endian, len = product(Shape) * element size
}

// Write stores tensors, in the given order, in a safetensors file at path.
// The header starts with "__metadata__" (omitted when metadata is empty) and
// is padded with spaces to a multiple of 8 bytes, as the upstream writer does.
// The file is written to a temporary file in the same directory and renamed
// into place, so readers never see a partial file.
func Write(path string, tensors []WriteTensor, metadata map[string]string) (err error) {
	hdr, err := header(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 1<<20)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	w.Write(n[:])
	w.Write(hdr)
	for _, t := range tensors {
		w.Write(t.Data)
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// header builds the padded JSON header and checks every tensor.
func header(tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return nil, fmt.Errorf("metadata %q: %q is not valid UTF-8", k, v)
		}
	}
	if len(metadata) > 0 {
		b.WriteString(`"` + metadataKey + `":`)
		if err := writeJSON(&b, metadata); err != nil {
			return nil, err
		}
	}
	seen := make(map[string]bool, len(tensors))
	offset := 0
	for i, t := range tensors {
		if t.Name == metadataKey {
			return nil, fmt.Errorf("tensor name %q is reserved", t.Name)
		}
		if !utf8.ValidString(t.Name) {
			return nil, fmt.Errorf("tensor name %q is not valid UTF-8", t.Name)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("duplicate tensor %q", t.Name)
		}
		seen[t.Name] = true
		size, ok := dtypeSizes[t.DType]
		if !ok {
			return nil, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		count := 1
		for _, d := range t.Shape {
			if d < 0 || (d != 0 && count > math.MaxInt/size/d) {
				return nil, fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
			}
			count *= d
		}
		if len(t.Data) != count*size {
			return nil, fmt.Errorf("tensor %q: %s shape %v needs %d bytes, have %d", t.Name, t.DType, t.Shape, count*size, len(t.Data))
		}
		if i > 0 || len(metadata) > 0 {
			b.WriteByte(',')
		}
		if err := writeJSON(&b, t.Name); err != nil {
			return nil, err
		}
		b.WriteString(`:{"dtype":`)
		writeJSON(&b, t.DType)
		b.WriteString(`,"shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&b, `],"data_offsets":[%d,%d]}`, offset, offset+len(t.Data))
		offset += len(t.Data)
	}
	b.WriteByte('}')
	for b.Len()%8 != 0 {
		b.WriteByte(' ')
	}
	if b.Len() > MaxHeaderSize {
		return nil, errors.New("header exceeds the size limit")
	}
	return b.Bytes(), nil
}

// writeJSON appends v as compact JSON without HTML escaping.
func writeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's trailing newline
	return nil
}
