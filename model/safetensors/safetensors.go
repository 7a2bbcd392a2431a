package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/troupe-ai/troupe/gpu"
)

const (
	// SingleFile is the file Open reads from a checkpoint directory.
	SingleFile = "model.safetensors"
	// IndexFile is the shard index Open prefers when it is present.
	IndexFile = "model.safetensors.index.json"

	// MaxHeaderSize bounds the JSON header, as the upstream reader does.
	MaxHeaderSize = 100 << 20

	metadataKey = "__metadata__"
)

// dtypeSizes holds the element size in bytes of every safetensors dtype with a
// whole-byte element. Tensors of these dtypes have their byte size checked when
// a file is opened; dtypes not listed here (sub-byte formats, future additions)
// are only checked for sane offsets.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// supported maps the dtypes Tensor hands out to their gpu.DType.
var supported = map[string]gpu.DType{"F32": gpu.F32, "BF16": gpu.BF16, "F16": gpu.F16}

// Tensor is one tensor of a Model. Data aliases the (memory-mapped, read-only)
// file: it must not be written to and is invalid after Model.Close.
type Tensor struct {
	Name     string
	DType    gpu.DType
	RawDType string // dtype as spelled in the header ("F32", "BF16", "F16")
	Shape    []int  // row-major; empty for a scalar
	Data     []byte // little-endian, len = product(Shape) * DType.Size()
	File     string // path of the file holding the tensor
}

// Elements is the number of elements, product(Shape).
func (t *Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Model is a set of tensors read from one safetensors file or from the shards
// named by a model.safetensors.index.json. Names, Has, Tensor and Metadata may
// be called concurrently; Close must not run concurrently with them.
type Model struct {
	where  string // file or directory, for error messages
	files  []*file
	byName map[string]*file
	names  []string
	meta   map[string]string
	closed bool
}

type file struct {
	path    string
	body    []byte // data section, after the header
	release func() error
	entries map[string]entry
	meta    map[string]string
}

type entry struct {
	dtype      string
	shape      []int
	begin, end int
}

// Open opens the checkpoint in dir: the shards listed by
// dir/model.safetensors.index.json when that file exists, otherwise
// dir/model.safetensors. No other *.safetensors file in dir is read.
func Open(dir string) (*Model, error) {
	index := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(index); err == nil {
		return openIndex(dir, index)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	single := filepath.Join(dir, SingleFile)
	if _, err := os.Stat(single); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %s: neither %s nor %s found", dir, SingleFile, IndexFile)
	}
	return OpenFile(single)
}

// OpenFile opens a single safetensors file.
func OpenFile(path string) (*Model, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	m := &Model{where: path, files: []*file{f}, byName: make(map[string]*file, len(f.entries)), meta: f.meta}
	for name := range f.entries {
		m.byName[name] = f
	}
	m.names = slices.Sorted(maps.Keys(m.byName))
	return m, nil
}

func openIndex(dir, index string) (*Model, error) {
	raw, err := os.ReadFile(index)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("safetensors: %s: invalid index: %w", index, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s: index has no weight_map entries", index)
	}
	m := &Model{where: index, byName: make(map[string]*file, len(idx.WeightMap)), meta: map[string]string{}}
	shards := map[string]*file{}
	for _, shard := range slices.Sorted(maps.Values(idx.WeightMap)) {
		if shards[shard] != nil {
			continue
		}
		if !filepath.IsLocal(shard) {
			m.Close()
			return nil, fmt.Errorf("safetensors: %s: shard %q is not a file inside %s", index, shard, dir)
		}
		f, err := openFile(filepath.Join(dir, shard))
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("%w (shard listed in %s)", err, index)
		}
		shards[shard] = f
		m.files = append(m.files, f)
		for k, v := range f.meta {
			if _, ok := m.meta[k]; !ok {
				m.meta[k] = v
			}
		}
	}
	for name, shard := range idx.WeightMap {
		f := shards[shard]
		if _, ok := f.entries[name]; !ok {
			m.Close()
			return nil, fmt.Errorf("safetensors: %s: index maps tensor %q to %s, which does not contain it", index, name, f.path)
		}
		m.byName[name] = f
	}
	m.names = slices.Sorted(maps.Keys(m.byName))
	return m, nil
}

// Names lists the tensor names in sorted order.
func (m *Model) Names() []string { return slices.Clone(m.names) }

// Has reports whether the model has a tensor called name, whatever its dtype.
func (m *Model) Has(name string) bool {
	_, ok := m.byName[name]
	return ok
}

// Tensor returns the named tensor. It fails if the tensor is absent, if its
// dtype is not F32, BF16 or F16, or if the model is closed. Unsupported dtypes
// are only reported here, so a file may hold e.g. I64 buffers nobody asks for.
func (m *Model) Tensor(name string) (*Tensor, error) {
	if m.closed {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: model is closed", m.where, name)
	}
	f, ok := m.byName[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: %s: no tensor %q", m.where, name)
	}
	e := f.entries[name]
	dt, ok := supported[e.dtype]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q: unsupported dtype %s", f.path, name, e.dtype)
	}
	return &Tensor{
		Name:     name,
		DType:    dt,
		RawDType: e.dtype,
		Shape:    slices.Clone(e.shape),
		Data:     f.body[e.begin:e.end:e.end],
		File:     f.path,
	}, nil
}

// Metadata returns a copy of the header's "__metadata__" map. For a sharded
// model it is the union over the shards, the first shard in name order winning.
func (m *Model) Metadata() map[string]string {
	if m.meta == nil {
		return map[string]string{}
	}
	return maps.Clone(m.meta)
}

// Close unmaps every file. Tensor data obtained earlier must not be used
// afterwards. Closing twice is harmless.
func (m *Model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for _, f := range m.files {
		if err := f.release(); err != nil {
			errs = append(errs, fmt.Errorf("safetensors: %s: %w", f.path, err))
		}
		f.body = nil
	}
	return errors.Join(errs...)
}

// openFile maps path and validates its header.
func openFile(path string) (*file, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer osf.Close()
	st, err := osf.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors: %s: not a regular file", path)
	}
	data, release, err := mapFile(osf, st.Size())
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	f, err := parse(path, data)
	if err != nil {
		release()
		return nil, err
	}
	f.release = release
	return f, nil
}

// parse validates the header of a whole file held in data.
func parse(path string, data []byte) (*file, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("safetensors: %s: "+format, append([]any{path}, args...)...)
	}
	if len(data) < 8 {
		return nil, fail("file is %d bytes, too short for the 8-byte header length", len(data))
	}
	n := binary.LittleEndian.Uint64(data)
	if n > MaxHeaderSize {
		return nil, fail("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(len(data)-8) {
		return nil, fail("header length %d exceeds the %d bytes after the length field (truncated file?)", n, len(data)-8)
	}
	hdr := data[8 : 8+n]
	body := data[8+n:]
	if !utf8.Valid(hdr) {
		return nil, fail("header is not valid UTF-8")
	}
	if t := bytes.TrimLeft(hdr, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, fail("header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("safetensors: %s: invalid JSON header: %w", path, err)
	}
	f := &file{path: path, body: body, entries: make(map[string]entry, len(raw))}
	for name, msg := range raw {
		if name == metadataKey {
			if err := json.Unmarshal(msg, &f.meta); err != nil {
				return nil, fmt.Errorf("safetensors: %s: %s is not a map of strings: %w", path, metadataKey, err)
			}
			continue
		}
		e, err := parseEntry(msg, len(body))
		if err != nil {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: %w", path, name, err)
		}
		f.entries[name] = e
	}
	return f, nil
}

func parseEntry(msg json.RawMessage, bodyLen int) (entry, error) {
	var info struct {
		DType   *string  `json:"dtype"`
		Shape   *[]int   `json:"shape"`
		Offsets *[]int64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(msg, &info); err != nil {
		return entry{}, fmt.Errorf("invalid entry: %w", err)
	}
	switch {
	case info.DType == nil:
		return entry{}, errors.New("missing dtype")
	case info.Shape == nil:
		return entry{}, errors.New("missing shape")
	case info.Offsets == nil:
		return entry{}, errors.New("missing data_offsets")
	case len(*info.Offsets) != 2:
		return entry{}, fmt.Errorf("data_offsets has %d values, want 2", len(*info.Offsets))
	}
	e := entry{dtype: *info.DType, shape: *info.Shape}
	begin, end := (*info.Offsets)[0], (*info.Offsets)[1]
	if begin < 0 || end < begin {
		return entry{}, fmt.Errorf("invalid data_offsets [%d, %d]", begin, end)
	}
	if end > int64(bodyLen) {
		return entry{}, fmt.Errorf("data_offsets [%d, %d] extend past the %d-byte data section (truncated file?)", begin, end, bodyLen)
	}
	e.begin, e.end = int(begin), int(end)
	count := 1
	for _, d := range e.shape {
		if d < 0 {
			return entry{}, fmt.Errorf("negative dimension in shape %v", e.shape)
		}
		if d != 0 && count > math.MaxInt/d {
			return entry{}, fmt.Errorf("shape %v overflows", e.shape)
		}
		count *= d
	}
	if size, ok := dtypeSizes[e.dtype]; ok {
		if count > math.MaxInt/size {
			return entry{}, fmt.Errorf("shape %v overflows", e.shape)
		}
		if want := count * size; want != e.end-e.begin {
			return entry{}, fmt.Errorf("%s shape %v needs %d bytes, data_offsets [%d, %d] give %d", e.dtype, e.shape, want, begin, end, e.end-e.begin)
		}
	}
	return e, nil
}
