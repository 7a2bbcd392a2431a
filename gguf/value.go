package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type of a metadata value, gguf_type as the file stores it.
type ValueType uint32

// The metadata value types, with their ids in the file.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// String names the type as the GGUF specification does ("UINT32", "ARRAY").
func (t ValueType) String() string {
	switch t {
	case TypeUint8:
		return "UINT8"
	case TypeInt8:
		return "INT8"
	case TypeUint16:
		return "UINT16"
	case TypeInt16:
		return "INT16"
	case TypeUint32:
		return "UINT32"
	case TypeInt32:
		return "INT32"
	case TypeFloat32:
		return "FLOAT32"
	case TypeBool:
		return "BOOL"
	case TypeString:
		return "STRING"
	case TypeArray:
		return "ARRAY"
	case TypeUint64:
		return "UINT64"
	case TypeInt64:
		return "INT64"
	case TypeFloat64:
		return "FLOAT64"
	}
	return fmt.Sprintf("ValueType(%d)", uint32(t))
}

// size is the encoded size of a fixed-size scalar of type t, 0 for STRING,
// ARRAY and unknown ids.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is one metadata value: a scalar, a string or an array. Its accessors
// report false when the value is not of the asked type; they never convert
// between types, except Int and Float, which accept every integer
// (respectively float) type whose value they can represent exactly.
//
// An array holds elements of one type. Arrays of scalars and strings are held
// as Go slices of the matching type; arrays of arrays as []Value.
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	bits uint64    // scalars: the value's bits, zero-extended (sign-extended for signed types)
	str  string
	arr  any // []uint8, []int8, ..., []string, []bool, []Value
}

// Type is the value's type.
func (v Value) Type() ValueType { return v.typ }

// ElemType is the element type of an array value; it is only meaningful when
// Type is TypeArray.
func (v Value) ElemType() ValueType { return v.elem }

// Len is the number of elements of an array, 0 for any other value.
func (v Value) Len() int {
	switch a := v.arr.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

// Uint8 returns a UINT8 value.
func (v Value) Uint8() (uint8, bool) { return uint8(v.bits), v.typ == TypeUint8 }

// Int8 returns an INT8 value.
func (v Value) Int8() (int8, bool) { return int8(v.bits), v.typ == TypeInt8 }

// Uint16 returns a UINT16 value.
func (v Value) Uint16() (uint16, bool) { return uint16(v.bits), v.typ == TypeUint16 }

// Int16 returns an INT16 value.
func (v Value) Int16() (int16, bool) { return int16(v.bits), v.typ == TypeInt16 }

// Uint32 returns a UINT32 value.
func (v Value) Uint32() (uint32, bool) { return uint32(v.bits), v.typ == TypeUint32 }

// Int32 returns an INT32 value.
func (v Value) Int32() (int32, bool) { return int32(v.bits), v.typ == TypeInt32 }

// Uint64 returns a UINT64 value.
func (v Value) Uint64() (uint64, bool) { return v.bits, v.typ == TypeUint64 }

// Int64 returns an INT64 value.
func (v Value) Int64() (int64, bool) { return int64(v.bits), v.typ == TypeInt64 }

// Float32 returns a FLOAT32 value.
func (v Value) Float32() (float32, bool) {
	return math.Float32frombits(uint32(v.bits)), v.typ == TypeFloat32
}

// Float64 returns a FLOAT64 value.
func (v Value) Float64() (float64, bool) { return math.Float64frombits(v.bits), v.typ == TypeFloat64 }

// Bool returns a BOOL value. Any nonzero byte is true, as in ggml.
func (v Value) Bool() (bool, bool) { return v.bits != 0, v.typ == TypeBool }

// Str returns a STRING value (the bytes as stored; GGUF strings are meant to
// be UTF-8, which is not checked).
func (v Value) Str() (string, bool) { return v.str, v.typ == TypeString }

// Int returns a value of any integer type as an int64. It reports false for
// other types and for a UINT64 above math.MaxInt64.
func (v Value) Int() (int64, bool) {
	switch v.typ {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeInt64:
		return int64(v.bits), true
	case TypeUint64:
		return int64(v.bits), v.bits <= math.MaxInt64
	}
	return 0, false
}

// Float returns a FLOAT32 or FLOAT64 value as a float64 (exactly).
func (v Value) Float() (float64, bool) {
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Strings returns an array of strings. The slice is the value's own: do not
// modify it.
func (v Value) Strings() ([]string, bool) { a, ok := v.arr.([]string); return a, ok }

// Float32s returns an array of FLOAT32. The slice is the value's own.
func (v Value) Float32s() ([]float32, bool) { a, ok := v.arr.([]float32); return a, ok }

// Int32s returns an array of INT32. The slice is the value's own.
func (v Value) Int32s() ([]int32, bool) { a, ok := v.arr.([]int32); return a, ok }

// Uint32s returns an array of UINT32. The slice is the value's own.
func (v Value) Uint32s() ([]uint32, bool) { a, ok := v.arr.([]uint32); return a, ok }

// Ints returns an array of any integer element type as int64s (a new slice).
// It reports false for other arrays and when a UINT64 element exceeds
// math.MaxInt64.
func (v Value) Ints() ([]int64, bool) {
	if v.typ != TypeArray {
		return nil, false
	}
	conv := func(n int, at func(int) int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	switch a := v.arr.(type) {
	case []uint8:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int8:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []uint16:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int16:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []uint32:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int32:
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	case []int64:
		return conv(len(a), func(i int) int64 { return a[i] }), true
	case []uint64:
		for _, x := range a {
			if x > math.MaxInt64 {
				return nil, false
			}
		}
		return conv(len(a), func(i int) int64 { return int64(a[i]) }), true
	}
	return nil, false
}

// Values returns an array of arrays, one Value per element. The slice is the
// value's own.
func (v Value) Values() ([]Value, bool) { a, ok := v.arr.([]Value); return a, ok }

// Any returns the value as a plain Go value: the scalar (uint8 ... float64,
// bool, string) or the array's slice ([]uint8 ... []string, []Value for an
// array of arrays). A slice is the value's own.
func (v Value) Any() any {
	switch v.typ {
	case TypeUint8:
		return uint8(v.bits)
	case TypeInt8:
		return int8(v.bits)
	case TypeUint16:
		return uint16(v.bits)
	case TypeInt16:
		return int16(v.bits)
	case TypeUint32:
		return uint32(v.bits)
	case TypeInt32:
		return int32(v.bits)
	case TypeFloat32:
		return math.Float32frombits(uint32(v.bits))
	case TypeBool:
		return v.bits != 0
	case TypeString:
		return v.str
	case TypeArray:
		return v.arr
	case TypeUint64:
		return v.bits
	case TypeInt64:
		return int64(v.bits)
	case TypeFloat64:
		return math.Float64frombits(v.bits)
	}
	return nil
}

// String formats the value for people: strings quoted, arrays as
// "[TYPE x N: first elements ...]".
func (v Value) String() string {
	switch v.typ {
	case TypeString:
		return strconv.Quote(v.str)
	case TypeArray:
		var b strings.Builder
		n := v.Len()
		fmt.Fprintf(&b, "[%v x %d:", v.elem, n)
		const show = 4
		for i := 0; i < n && i < show; i++ {
			b.WriteByte(' ')
			b.WriteString(v.elemString(i))
		}
		if n > show {
			b.WriteString(" ...")
		}
		b.WriteByte(']')
		return b.String()
	}
	return fmt.Sprint(v.Any())
}

func (v Value) elemString(i int) string {
	switch a := v.arr.(type) {
	case []string:
		return strconv.Quote(a[i])
	case []Value:
		return a[i].String()
	case []uint8:
		return fmt.Sprint(a[i])
	case []int8:
		return fmt.Sprint(a[i])
	case []uint16:
		return fmt.Sprint(a[i])
	case []int16:
		return fmt.Sprint(a[i])
	case []uint32:
		return fmt.Sprint(a[i])
	case []int32:
		return fmt.Sprint(a[i])
	case []float32:
		return fmt.Sprint(a[i])
	case []bool:
		return fmt.Sprint(a[i])
	case []uint64:
		return fmt.Sprint(a[i])
	case []int64:
		return fmt.Sprint(a[i])
	case []float64:
		return fmt.Sprint(a[i])
	}
	return "?"
}
