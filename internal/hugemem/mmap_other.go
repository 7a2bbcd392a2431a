//go:build !unix

package hugemem

// reserve allocates on the Go heap where there is no mmap.
func reserve(size int) ([]byte, error) { return make([]byte, size), nil }

func adviseHuge([]byte) error { return errNoTHP }

func seal(mem, buf []byte, used int) error { return nil }

func release(mem []byte) error { return nil }
