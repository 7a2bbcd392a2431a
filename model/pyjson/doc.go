// Package pyjson decodes JSON written by Python's json module, which by
// default (allow_nan=True) emits the bare tokens Infinity, -Infinity and NaN
// for non-finite floats, as in a Hugging Face config.json with
// "time_step_limit": [0.0, Infinity]. Those tokens are not JSON, so
// encoding/json rejects the whole file; Python's json.loads, and
// transformers with it, accept them.
//
// Unmarshal matches encoding/json.Unmarshal in every other respect because it
// is encoding/json underneath: a small scanner, aware of strings and escapes,
// replaces each stand-alone token by a marker number that appears nowhere else
// in the document, encoding/json decodes the result into the caller's value,
// and a reflective walk then swaps the markers for ±Inf/NaN. Struct tags,
// embedded structs, case-insensitive field matching, maps, pointers and
// interfaces therefore behave exactly as the standard library defines them,
// rather than as a second decoder would approximate them. Tokens inside
// strings, tokens glued to other characters (NaN1, -NaN) and tokens in key
// position are left alone, so encoding/json reports them as the syntax errors
// they are; error offsets are mapped back to the original input.
//
// One limit of the approach: a type with its own UnmarshalJSON method (other
// than json.Number and json.RawMessage, which are handled) sees the marker
// text instead of the token.
package pyjson
