//go:build !unix

package templates_test

func processCPU() int64 { return 0 }
