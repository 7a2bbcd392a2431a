//go:build linux && cgo

package cpu

import (
	"fmt"
	"runtime"
	"syscall"
)

// hugePage is the size of a transparent huge page on x86-64 and arm64.
const hugePage = 2 << 20

// panelArena is one anonymous mapping that holds the packed copies of a
// batch of weights, aligned to and advised for 2 MiB pages: a prefill step
// streams every packed weight once, and under virtualisation each TLB miss
// on 4 KiB pages is a two-level page walk. It is unmapped once nothing
// refers to it (each gpu.Packed it backs holds it as its Owner).
type panelArena struct {
	buf []byte // the aligned, usable part
}

func newPanelArena(size int) (*panelArena, error) {
	mem, err := syscall.Mmap(-1, 0, size+hugePage, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_NORESERVE)
	if err != nil {
		return nil, fmt.Errorf("gpu/cpu: map %d bytes for packed weights: %w", size, err)
	}
	off := int(-uintptrOf(mem) & (hugePage - 1))
	a := &panelArena{buf: mem[off : off+size : off+size]}
	// Best effort: without THP the arena works on small pages.
	_ = syscall.Madvise(a.buf, syscall.MADV_HUGEPAGE)
	runtime.AddCleanup(a, func(m []byte) { _ = syscall.Munmap(m) }, mem)
	return a, nil
}
