package hub

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Repositories of GGUF files (bartowski/..., unsloth/..., TheBloke/...) hold
// one model in several quantizations, each one file or a split set
// (NAME-00001-of-00003.gguf), sometimes in a folder per quantization, beside
// vision projectors (mmproj-*.gguf). A model reference picks one
// quantization as llama.cpp's -hf and Ollama's hf.co/ names do:
// org/name:Q4_K_M. Without one, Q4_K_M is taken when the repository has it
// (their default too), or the only quantization there is.

// DefaultQuant is the quantization taken from a GGUF repository when the
// model reference names none.
const DefaultQuant = "Q4_K_M"

// quantTag is what may follow the ':' of a model reference.
var quantTag = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// splitPart matches a split set's part suffix, -00001-of-00003.
var splitPart = regexp.MustCompile(`-(\d{5})-of-(\d{5})$`)

// ParseModelRef splits a model reference, org/name or org/name:QUANT, into
// the repository id and the quantization ("" when none is named). ok is
// false when ref is not of that form.
func ParseModelRef(ref string) (repo, quant string, ok bool) {
	repo, quant, found := strings.Cut(ref, ":")
	if found && !quantTag.MatchString(quant) {
		return "", "", false
	}
	return repo, quant, IsRepoID(repo)
}

// ggufSet is one GGUF model of a repository: a file, or every part of a
// split set, in order.
type ggufSet struct {
	files []string
	base  string // the file name without the part suffix and .gguf
}

// tag is the set's quantization as its name gives it: the last '-' or
// '.' separated part of its base name (Llama-3.2-1B-Q4_K_M: Q4_K_M).
func (s ggufSet) tag() string {
	if i := strings.LastIndexAny(s.base, "-."); i >= 0 {
		return s.base[i+1:]
	}
	return s.base
}

// matches says whether the set is the quantization quant: its base name
// ends with it after a separator (case aside), or its folder is named so.
func (s ggufSet) matches(quant string) bool {
	b, q := strings.ToLower(s.base), strings.ToLower(quant)
	if b == q || strings.HasSuffix(b, q) && strings.ContainsRune("-._", rune(b[len(b)-len(q)-1])) {
		return true
	}
	dir := path.Base(path.Dir(s.files[0]))
	return strings.EqualFold(dir, quant)
}

// ggufSets groups a repository's GGUF files into models, leaving out vision
// projectors and split sets with parts missing.
func ggufSets(names []string) []ggufSet {
	type key struct{ dir, base string }
	parts := map[key]map[int]string{}
	total := map[key]int{}
	for _, n := range names {
		file := path.Base(n)
		if !strings.EqualFold(path.Ext(file), ".gguf") || strings.Contains(strings.ToLower(file), "mmproj") {
			continue
		}
		base := file[:len(file)-len(".gguf")]
		part, of := 1, 1
		if m := splitPart.FindStringSubmatch(base); m != nil {
			part, _ = strconv.Atoi(m[1])
			of, _ = strconv.Atoi(m[2])
			base = base[:len(base)-len(m[0])]
		}
		k := key{path.Dir(n), base}
		if parts[k] == nil {
			parts[k] = map[int]string{}
		}
		parts[k][part] = n
		total[k] = max(total[k], of)
	}
	var sets []ggufSet
	for k, ps := range parts {
		s := ggufSet{base: k.base}
		for i := 1; i <= total[k]; i++ {
			if ps[i] == "" {
				break
			}
			s.files = append(s.files, ps[i])
		}
		if len(s.files) > 0 && len(s.files) == total[k] {
			sets = append(sets, s)
		}
	}
	slices.SortFunc(sets, func(a, b ggufSet) int { return strings.Compare(a.files[0], b.files[0]) })
	return sets
}

// selectGGUF picks the GGUF model of quantization quant ("" for the
// default) among a repository's files.
func selectGGUF(repo string, names []string, quant string) (ggufSet, error) {
	sets := ggufSets(names)
	if len(sets) == 0 {
		return ggufSet{}, fmt.Errorf("hub: %s has no complete GGUF model file: %w", repo, ErrUnsupported)
	}
	want := quant
	if want == "" {
		if len(sets) == 1 {
			return sets[0], nil
		}
		want = DefaultQuant
	}
	var hit []ggufSet
	for _, s := range sets {
		if s.matches(want) {
			hit = append(hit, s)
		}
	}
	switch {
	case len(hit) == 1:
		return hit[0], nil
	case len(hit) > 1:
		return ggufSet{}, fmt.Errorf("hub: %s has more than one GGUF model for %s (%s): name one by its file's quantization, %s:QUANT: %w",
			repo, want, listSome(firstFiles(hit)), repo, ErrUnsupported)
	case quant == "":
		return ggufSet{}, fmt.Errorf("hub: %s holds GGUF models in several quantizations and none is %s: name one, %s:QUANT, one of %s: %w",
			repo, DefaultQuant, repo, strings.Join(tags(sets), ", "), ErrUnsupported)
	}
	return ggufSet{}, fmt.Errorf("hub: %s has no GGUF model in quantization %s; it has %s: %w", repo, quant, strings.Join(tags(sets), ", "), ErrUnsupported)
}

// firstFiles lists the sets' first files.
func firstFiles(sets []ggufSet) []string {
	out := make([]string, len(sets))
	for i, s := range sets {
		out[i] = s.files[0]
	}
	return out
}

// tags lists the sets' quantizations (tag), sorted, without repeats.
func tags(sets []ggufSet) []string {
	var out []string
	for _, s := range sets {
		if t := s.tag(); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// cachedGGUF finds the GGUF model of quantization quant in a snapshot
// folder (the files a Pull of it fetched, and maybe others'), or reports
// what is missing.
func cachedGGUF(repo, dir, quant string) (ggufSet, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			names = append(names, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return ggufSet{}, fmt.Errorf("hub: %w", err)
	}
	return selectGGUF(repo, names, quant)
}
