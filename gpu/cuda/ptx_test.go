package cuda

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// TestPTXCurrent fails when ptx/kernels.ptx was not generated from the
// kernel sources at hand (with no sources yet: from the empty set).
func TestPTXCurrent(t *testing.T) {
	var src fs.FS = os.DirFS("kernels")
	if _, err := os.Stat("kernels"); errors.Is(err, fs.ErrNotExist) {
		src = fstest.MapFS{} // no kernels folder yet: the empty set
	}
	want, err := SourcesHash(src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PTXSourcesHash()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("gpu/cuda/ptx/kernels.ptx is stale: generated from sources with SHA-256 %s, the sources at hand have %s; run gpu/cuda/genptx.sh", got, want)
	}
}

// TestPTXMatchesTable checks every kernel the PTX defines against the
// kernel table: a kernel the table does not list, or lists with other
// arguments, means kernels.go and kernels/*.cu disagree.
func TestPTXMatchesTable(t *testing.T) {
	checkEntries(t, ptxEntries(PTX()))
}

func checkEntries(t *testing.T, entries []ptxEntry) {
	t.Helper()
	table := kernels()
	for _, e := range entries {
		i := slices.IndexFunc(table[:], func(k kernelSpec) bool { return k.name == e.name })
		if i < 0 {
			t.Errorf("the PTX defines kernel %s, which kernels.go does not list", e.name)
			continue
		}
		k := table[i]
		if len(e.params) != len(k.args) {
			t.Errorf("kernel %s: the PTX has %d parameters %v, kernels.go lists %d %v", e.name, len(e.params), e.params, len(k.args), k.args)
			continue
		}
		for j, a := range k.args {
			if !strings.HasSuffix(e.params[j], a.ptxWidth()) {
				t.Errorf("kernel %s: parameter %d is %s in the PTX, %v (%s bits) in kernels.go", e.name, j, e.params[j], a, a.ptxWidth())
			}
		}
	}
}

func TestSourcesHash(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   fstest.MapFS
		want string
	}{
		{"empty", fstest.MapFS{}, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"other files ignored", fstest.MapFS{"doc.go": {Data: []byte("package kernels")}, "host.cc": {Data: []byte("x")}},
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		// sha256("abc"): the files' contents in name order (common.cuh < x.cu).
		{"name order", fstest.MapFS{"x.cu": {Data: []byte("bc")}, "common.cuh": {Data: []byte("a")}},
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"byte order", fstest.MapFS{"b.cu": {Data: []byte("c")}, "B.cu": {Data: []byte("a")}, "a.cu": {Data: []byte("b")}},
			"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SourcesHash(tc.fs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPTXSourcesHashErrors(t *testing.T) {
	for _, tc := range []struct{ name, ptx, err string }{
		{"no header", ".version 7.8\n", "does not start with"},
		{"short hash", ptxHashPrefix + "abcd\n", "malformed"},
		{"not hex", ptxHashPrefix + strings.Repeat("zz", 32) + "\n", "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ptxSourcesHash(tc.ptx)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

func TestPTXEntries(t *testing.T) {
	const ptx = `.version 7.8
.target sm_80
.address_size 64

	// .globl	tk_scale

.visible .entry tk_scale(
	.param .u64 tk_scale_param_0,
	.param .u64 tk_scale_param_1,
	.param .f32 tk_scale_param_2
)
{
	ret;
}
.visible .entry tk_softplus(.param .u64 tk_softplus_param_0, .param .u64 tk_softplus_param_1)
{
	ret;
}
.visible .entry tk_rope(
	.param .u64 tk_rope_param_0,
	.param .u64 tk_rope_param_1,
	.param .u64 tk_rope_param_2,
	.param .u32 tk_rope_param_3,
	.param .u32 tk_rope_param_4,
	.param .u32 tk_rope_param_5
)
{
	ret;
}
`
	got := ptxEntries(ptx)
	want := []ptxEntry{
		{"tk_scale", []string{".u64", ".u64", ".f32"}},
		{"tk_softplus", []string{".u64", ".u64"}},
		{"tk_rope", []string{".u64", ".u64", ".u64", ".u32", ".u32", ".u32"}},
	}
	if !slices.EqualFunc(got, want, func(a, b ptxEntry) bool { return a.name == b.name && slices.Equal(a.params, b.params) }) {
		t.Fatalf("got %v, want %v", got, want)
	}
	checkEntries(t, got) // and they agree with the table
}
