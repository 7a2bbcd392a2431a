package cuda

import (
	"bufio"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

// kernelsPTX is ptx/kernels.ptx, which genptx.sh generates from
// kernels/*.cu. It is read-only.
//
//go:embed ptx/kernels.ptx
var kernelsPTX string

// ptxHashPrefix starts the first line of kernels.ptx, before the hex SHA-256
// of the kernel sources it was generated from (see SourcesHash).
const ptxHashPrefix = "// troupe sources-sha256: "

// PTX returns the embedded PTX module of the kernels.
func PTX() string { return kernelsPTX }

// PTXSourcesHash returns the hex SHA-256 of the kernel sources the embedded
// PTX was generated from, as its first line records it.
func PTXSourcesHash() (string, error) {
	return ptxSourcesHash(kernelsPTX)
}

func ptxSourcesHash(ptx string) (string, error) {
	line, _, _ := strings.Cut(ptx, "\n")
	h, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), ptxHashPrefix)
	if !ok {
		return "", fmt.Errorf("gpu/cuda: PTX does not start with %q: regenerate it with gpu/cuda/genptx.sh", ptxHashPrefix)
	}
	if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("gpu/cuda: PTX records a malformed sources hash %q", h)
	}
	return h, nil
}

// isKernelSource reports whether a file of the kernels folder is part of
// what the PTX is compiled from: the .cu files and the .cuh headers they
// include.
func isKernelSource(name string) bool {
	return strings.HasSuffix(name, ".cu") || strings.HasSuffix(name, ".cuh")
}

// SourcesHash is the hex SHA-256 of the kernel sources in fsys (the
// kernels folder): the contents of its .cu and .cuh files concatenated in
// byte order of their names, as genptx.sh computes it (LC_ALL=C sort; no
// sources: the hash of nothing).
func SourcesHash(fsys fs.FS) (string, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return "", fmt.Errorf("gpu/cuda: kernel sources: %w", err)
	}
	var names []string
	for _, e := range ents {
		if e.Type().IsRegular() && isKernelSource(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return "", fmt.Errorf("gpu/cuda: kernel sources: %w", err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ptxEntry is a kernel the PTX defines: its name and its parameters' PTX
// types (".u64", ".u32", ".f32", ...).
type ptxEntry struct {
	name   string
	params []string
}

var (
	entryRE = regexp.MustCompile(`^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(?`)
	paramRE = regexp.MustCompile(`\.param\s+(\.[a-z]+[0-9]+)\s+[\w$]+`)
)

// ptxEntries lists the kernels (.entry) of a PTX module with their
// parameters, in module order.
func ptxEntries(ptx string) []ptxEntry {
	var out []ptxEntry
	in := false
	sc := bufio.NewScanner(strings.NewReader(ptx))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := entryRE.FindStringSubmatch(line); m != nil {
			out = append(out, ptxEntry{name: m[1]})
			in = true
		}
		if !in {
			continue
		}
		e := &out[len(out)-1]
		for _, m := range paramRE.FindAllStringSubmatch(line, -1) {
			e.params = append(e.params, m[1])
		}
		if strings.Contains(line, ")") {
			in = false
		}
	}
	return out
}

// ptxWidth is the PTX parameter width of an argument kind.
func (k argKind) ptxWidth() string {
	switch k {
	case argPtr, argI64:
		return "64"
	case argI32, argF32:
		return "32"
	}
	return "?"
}
