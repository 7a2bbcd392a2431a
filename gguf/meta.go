package gguf

import (
	"fmt"
	"math"
)

// Metadata keys every model file carries.
const (
	// ArchitectureKey names the model family ("llama", "qwen3"); the
	// family's hyperparameters live under keys prefixed with it.
	ArchitectureKey = "general.architecture"
	// FileTypeKey is llama.cpp's LLAMA_FTYPE_* of the file (mostly which
	// quantization it was made with).
	FileTypeKey = "general.file_type"
	// QuantizationVersionKey is the version of the quantized formats
	// (2 for every type this package knows).
	QuantizationVersionKey = "general.quantization_version"
)

// lookup returns the value of key, checking its type with ok (nil accepts
// any type); want names the accepted types for the error.
func (f *File) lookup(key, want string, ok func(Value) bool) (Value, error) {
	v, found := f.Value(key)
	if !found {
		return Value{}, fmt.Errorf("gguf: %s: metadata key %q: %w", f.Path, key, ErrNotFound)
	}
	if ok != nil && !ok(v) {
		return Value{}, f.typeError(key, v, want)
	}
	return v, nil
}

func (f *File) typeError(key string, v Value, want string) error {
	got := v.Type().String()
	if v.Type() == TypeArray {
		got = fmt.Sprintf("ARRAY of %v", v.ElemType())
	}
	return fmt.Errorf("gguf: %s: metadata key %q is %s, want %s: %w", f.Path, key, got, want, ErrType)
}

func isType(t ValueType) func(Value) bool {
	return func(v Value) bool { return v.Type() == t }
}

func isArrayOf(t ValueType) func(Value) bool {
	return func(v Value) bool { return v.Type() == TypeArray && v.ElemType() == t }
}

// String returns the STRING value of key.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key, "STRING", isType(TypeString))
	s, _ := v.Str()
	return s, err
}

// Uint32 returns the UINT32 value of key.
func (f *File) Uint32(key string) (uint32, error) {
	v, err := f.lookup(key, "UINT32", isType(TypeUint32))
	n, _ := v.Uint32()
	return n, err
}

// Int32 returns the INT32 value of key.
func (f *File) Int32(key string) (int32, error) {
	v, err := f.lookup(key, "INT32", isType(TypeInt32))
	n, _ := v.Int32()
	return n, err
}

// Uint64 returns the UINT64 value of key.
func (f *File) Uint64(key string) (uint64, error) {
	v, err := f.lookup(key, "UINT64", isType(TypeUint64))
	n, _ := v.Uint64()
	return n, err
}

// Float32 returns the FLOAT32 value of key.
func (f *File) Float32(key string) (float32, error) {
	v, err := f.lookup(key, "FLOAT32", isType(TypeFloat32))
	x, _ := v.Float32()
	return x, err
}

// Bool returns the BOOL value of key.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key, "BOOL", isType(TypeBool))
	b, _ := v.Bool()
	return b, err
}

// Int returns the value of key, of any integer type, as an int. Writers
// differ in the integer type they store a count or an id with (llama.cpp
// writes UINT32, other tools INT32 or UINT64); hyperparameters should be read
// with Int.
func (f *File) Int(key string) (int, error) {
	v, err := f.lookup(key, "an integer", func(v Value) bool { _, ok := v.Int(); return ok })
	if err != nil {
		return 0, err
	}
	n, _ := v.Int()
	if n > math.MaxInt || n < math.MinInt {
		return 0, fmt.Errorf("gguf: %s: metadata key %q: %d does not fit an int: %w", f.Path, key, n, ErrMalformed)
	}
	return int(n), nil
}

// Float returns the FLOAT32 or FLOAT64 value of key as a float64.
func (f *File) Float(key string) (float64, error) {
	v, err := f.lookup(key, "FLOAT32 or FLOAT64", func(v Value) bool { _, ok := v.Float(); return ok })
	x, _ := v.Float()
	return x, err
}

// Strings returns the ARRAY of STRING value of key. The slice is shared with
// the File: do not modify it.
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.lookup(key, "ARRAY of STRING", isArrayOf(TypeString))
	a, _ := v.Strings()
	return a, err
}

// Float32s returns the ARRAY of FLOAT32 value of key. The slice is shared
// with the File: do not modify it.
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.lookup(key, "ARRAY of FLOAT32", isArrayOf(TypeFloat32))
	a, _ := v.Float32s()
	return a, err
}

// Int32s returns the ARRAY of INT32 value of key. The slice is shared with
// the File: do not modify it.
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.lookup(key, "ARRAY of INT32", isArrayOf(TypeInt32))
	a, _ := v.Int32s()
	return a, err
}

// Ints returns an ARRAY of any integer type as int64s (a new slice).
func (f *File) Ints(key string) ([]int64, error) {
	v, err := f.lookup(key, "ARRAY of an integer type", func(v Value) bool { _, ok := v.Ints(); return ok })
	if err != nil {
		return nil, err
	}
	a, _ := v.Ints()
	return a, nil
}

// Architecture returns general.architecture, the model family.
func (f *File) Architecture() (string, error) { return f.String(ArchitectureKey) }
