//go:build linux

package hugemem

import "syscall"

func reserve(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
}

func adviseHuge(b []byte) error { return syscall.Madvise(b, syscall.MADV_HUGEPAGE) }

// seal makes buf[:used] read-only and hands the rest of buf back to the
// kernel (the mapping stays, so Close unmaps it whole).
func seal(mem, buf []byte, used int) error {
	if used > len(buf) {
		used = len(buf)
	}
	if used > 0 {
		if err := syscall.Mprotect(buf[:used], syscall.PROT_READ); err != nil {
			return err
		}
	}
	if used < len(buf) {
		return syscall.Madvise(buf[used:], syscall.MADV_DONTNEED)
	}
	return nil
}

func release(mem []byte) error { return syscall.Munmap(mem) }
