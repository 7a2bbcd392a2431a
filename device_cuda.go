//go:build cuda

package troupe

import (
	"fmt"
	"log/slog"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cuda"
)

// The loader checks a CUDA device's memory before the weights go up.
var _ memoryChecker = (*cuda.Device)(nil)

// cudaBuilt reports whether the CUDA backend is built in (-tags cuda).
const cudaBuilt = true

// openCUDA creates the CUDA device ordinal (gpu/cuda).
func openCUDA(ordinal int, log *slog.Logger) (gpu.Device, func(), error) {
	dev, err := cuda.New(cuda.Options{Ordinal: ordinal, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("device cuda:%d: %w", ordinal, err)
	}
	return dev, logClose(log, dev.Name(), dev.Close), nil
}
