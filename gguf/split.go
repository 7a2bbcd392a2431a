package gguf

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The metadata keys of a split set, as llama.cpp's gguf-split writes them
// in every part.
const (
	// SplitNoKey is the part's index, from 0 (UINT16).
	SplitNoKey = "split.no"
	// SplitCountKey is the number of parts (UINT16).
	SplitCountKey = "split.count"
	// SplitTensorsKey is the number of tensors over all parts (INT32).
	SplitTensorsKey = "split.tensors.count"
)

// maxSplits bounds the parts of a set (gguf-split numbers them in five
// digits).
const maxSplits = 99999

// SplitPath is the path of part i (from 0) of a set of n parts whose first
// part is at path: NAME-00001-of-0000N.gguf gives NAME-0000{i+1}-of-0000N.gguf.
// ok is false when path is not named as a first part.
func SplitPath(path string, i, n int) (string, bool) {
	prefix, no, count, ok := splitName(path)
	if !ok || no != 1 || count != n {
		return "", false
	}
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, i+1, n), true
}

// splitName parses NAME-0000I-of-0000N.gguf.
func splitName(path string) (prefix string, no, count int, ok bool) {
	dir, base := filepath.Split(path)
	stem, found := strings.CutSuffix(base, ".gguf")
	if !found || len(stem) < len("-00001-of-00001")+1 {
		return "", 0, 0, false
	}
	tail := stem[len(stem)-len("-00001-of-00001"):]
	if tail[0] != '-' || tail[6:10] != "-of-" {
		return "", 0, 0, false
	}
	no, err1 := strconv.Atoi(tail[1:6])
	count, err2 := strconv.Atoi(tail[10:])
	if err1 != nil || err2 != nil || no < 1 || count < 1 || no > count {
		return "", 0, 0, false
	}
	return dir + stem[:len(stem)-len(tail)], no, count, true
}

// Find returns the GGUF file of the model in folder dir: its only .gguf
// file, or the first part of its only split set (the part that carries the
// metadata). No .gguf file, or several models, is an error naming them.
func Find(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("gguf: %w", err)
	}
	var names, firsts []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(strings.ToLower(n), ".gguf") {
			continue
		}
		names = append(names, n)
		if _, no, _, split := splitName(n); !split || no == 1 {
			firsts = append(firsts, n)
		}
	}
	switch {
	case len(names) == 0:
		return "", fmt.Errorf("gguf: %s has no .gguf file", dir)
	case len(firsts) == 1:
		return filepath.Join(dir, firsts[0]), nil
	case len(firsts) == 0:
		return "", fmt.Errorf("gguf: %s holds parts of a split GGUF set but not its first one (%s)", dir, strings.Join(names, ", "))
	}
	return "", fmt.Errorf("gguf: %s holds several GGUF models (%s): name the file", dir, strings.Join(firsts, ", "))
}

// splitInfo reads a file's split keys: its part index and the number of
// parts (0, 1 when it is not split).
func (f *File) splitInfo() (no, count int, err error) {
	if !f.Has(SplitCountKey) {
		return 0, 1, nil
	}
	c, err := f.Int(SplitCountKey)
	if err != nil {
		return 0, 0, err
	}
	n, err := f.Int(SplitNoKey)
	if err != nil {
		return 0, 0, err
	}
	if c < 1 || c > maxSplits || n < 0 || n >= c {
		return 0, 0, fmt.Errorf("gguf: %s: %w: %s = %d, %s = %d", f.Path, ErrMalformed, SplitNoKey, n, SplitCountKey, c)
	}
	return n, c, nil
}

// openParts opens the other parts of a split set whose first part f is,
// and takes their tensors.
func (f *File) openParts() error {
	no, count, err := f.splitInfo()
	if err != nil || count == 1 {
		return err
	}
	if no != 0 {
		first := "its first part"
		if prefix, _, n, ok := splitName(f.Path); ok {
			first = fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, 1, n)
		}
		return fmt.Errorf("gguf: %s is part %d of a split set of %d: open %s", f.Path, no+1, count, first)
	}
	if _, _, n, ok := splitName(f.Path); !ok || n != count {
		return fmt.Errorf("gguf: %s: the first of %d parts, but not named NAME-00001-of-%05d.gguf, so its other parts cannot be found", f.Path, count, count)
	}
	for i := 1; i < count; i++ {
		path, _ := SplitPath(f.Path, i, count)
		p, err := openOne(path)
		if err != nil {
			return fmt.Errorf("gguf: part %d of %d of %s: %w", i+1, count, f.Path, err)
		}
		f.parts = append(f.parts, p)
		pno, pcount, err := p.splitInfo()
		if err != nil {
			return err
		}
		if pno != i || pcount != count {
			return fmt.Errorf("gguf: %s: %w: says it is part %d of %d, expected part %d of %d", path, ErrMalformed, pno+1, pcount, i+1, count)
		}
		for _, t := range p.tensors {
			if _, dup := f.byName[t.Name]; dup {
				return fmt.Errorf("gguf: %s: %w: tensor %q is also in an earlier part", path, ErrMalformed, t.Name)
			}
			t.Part = i
			f.byName[t.Name] = len(f.tensors)
			f.tensors = append(f.tensors, t)
		}
	}
	if f.Has(SplitTensorsKey) {
		if want, err := f.Int(SplitTensorsKey); err == nil && want != len(f.tensors) {
			return fmt.Errorf("gguf: %s: %w: %s = %d, the %d parts hold %d tensors", f.Path, ErrMalformed, SplitTensorsKey, want, count, len(f.tensors))
		}
	}
	return nil
}
