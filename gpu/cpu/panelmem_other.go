//go:build !linux && cgo

package cpu

// panelArena holds the packed copies of a batch of weights; off Linux it is
// ordinary Go memory.
type panelArena struct {
	buf []byte
}

func newPanelArena(size int) (*panelArena, error) {
	buf := make([]byte, size+64)
	off := int(-uintptrOf(buf) & 63)
	return &panelArena{buf: buf[off : off+size : off+size]}, nil
}
