//go:build unix && !linux

package hugemem

import "golang.org/x/sys/unix"

func reserve(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
}

// adviseHuge: no transparent huge pages outside Linux.
func adviseHuge([]byte) error { return errNoTHP }

func seal(mem, buf []byte, used int) error {
	if used > len(buf) {
		used = len(buf)
	}
	if used > 0 {
		return unix.Mprotect(buf[:used], unix.PROT_READ)
	}
	return nil
}

func release(mem []byte) error { return unix.Munmap(mem) }
