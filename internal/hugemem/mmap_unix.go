//go:build unix && !linux

package hugemem

import "syscall"

func reserve(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
}

// adviseHuge: no transparent huge pages outside Linux.
func adviseHuge([]byte) error { return errNoTHP }

func seal(mem, buf []byte, used int) error {
	if used > len(buf) {
		used = len(buf)
	}
	if used > 0 {
		return syscall.Mprotect(buf[:used], syscall.PROT_READ)
	}
	return nil
}

func release(mem []byte) error { return syscall.Munmap(mem) }
