package gpu

// MemoryUse is a device's memory by use, in bytes.
type MemoryUse struct {
	Weights int64 // weight matrices held on the device
	KV      int64 // KV pages and recurrent state held on the device
	Scratch int64 // scratch and staging buffers of the operations
	Total   int64 // the device's memory, in use or not
}

// MemoryReporter is implemented by a Device with memory of its own (gpu/cuda)
// that accounts for what it allocates; the CPU devices, whose memory is
// the process's, do not implement it. MemoryUse reports the current figures
// and may be called from any goroutine while the device runs (the server's
// /metrics exports them as troupe_device_memory_bytes).
type MemoryReporter interface {
	MemoryUse() MemoryUse
}
