package engine

// SetParallelSample sets the sampling work from which e's steps sample
// their sequences in parallel (parallelSampleWork), for tests.
func SetParallelSample(e *Engine, work int) { e.parallelSample = work }
