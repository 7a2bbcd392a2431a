//go:build !cgo

package cpu

// The CPU kernels are C, compiled by cgo. A build without cgo
// (CGO_ENABLED=0, or no C compiler found) stops here with one line that
// names the fix, instead of "undefined: cpu.New" in every caller.
const _ = troupe_needs_cgo__build_with_CGO_ENABLED_1_and_gcc_installed
