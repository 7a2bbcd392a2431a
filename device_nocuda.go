//go:build !cuda

package troupe

import (
	"fmt"
	"log/slog"

	"github.com/troupe-ai/troupe/gpu"
)

// cudaBuilt reports whether the CUDA backend is built in (-tags cuda).
const cudaBuilt = false

// openCUDA fails: this binary was built without the CUDA backend.
func openCUDA(ordinal int, _ *slog.Logger) (gpu.Device, func(), error) {
	return nil, nil, fmt.Errorf("device cuda:%d: %w", ordinal, ErrNoCUDA)
}
