//go:build unix

package templates_test

import "syscall"

// processCPU returns the user+system CPU time this process has used, in
// nanoseconds. Benchmarks report it per op because wall time on a shared
// 2-core machine measures the neighbours as much as the code.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
