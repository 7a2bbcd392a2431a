package troupe

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/troupe-ai/troupe/gpu"
	"github.com/troupe-ai/troupe/gpu/cpu"
)

// ErrNoCUDA is the error of a cuda device in a binary built without the
// CUDA backend (the build tag cuda).
var ErrNoCUDA = errors.New("this binary has no CUDA backend; build with -tags cuda")

// DeviceSpec is a parsed Options.Device: the CPU, or CUDA device Ordinal.
type DeviceSpec struct {
	CUDA    bool
	Ordinal int
}

// String formats the spec as ParseDevice reads it: "cpu" or "cuda:N".
func (s DeviceSpec) String() string {
	if s.CUDA {
		return "cuda:" + strconv.Itoa(s.Ordinal)
	}
	return "cpu"
}

// ParseDevice reads a device name: "" or "cpu", "cuda" (device 0) or
// "cuda:N". It does not check that the backend is built in (CheckDevice).
func ParseDevice(s string) (DeviceSpec, error) {
	switch name, num, hasNum := strings.Cut(s, ":"); {
	case s == "" || s == "cpu":
		return DeviceSpec{}, nil
	case name == "cuda" && !hasNum:
		return DeviceSpec{CUDA: true}, nil
	case name == "cuda":
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || strconv.Itoa(n) != num {
			return DeviceSpec{}, fmt.Errorf("device %q: want cuda:N with N a device number >= 0", s)
		}
		return DeviceSpec{CUDA: true, Ordinal: n}, nil
	}
	return DeviceSpec{}, fmt.Errorf("device %q: want cpu, cuda or cuda:N", s)
}

// CheckDevice parses a device name and reports whether this binary can
// create it: a cuda device fails with ErrNoCUDA unless the binary was built
// with -tags cuda. It touches no hardware.
func CheckDevice(s string) (DeviceSpec, error) {
	spec, err := ParseDevice(s)
	if err != nil {
		return spec, err
	}
	if spec.CUDA && !cudaBuilt {
		return spec, fmt.Errorf("device %s: %w", spec, ErrNoCUDA)
	}
	return spec, nil
}

// openDevice creates the compute device Options.Device names, with the
// function that closes it.
func openDevice(opts Options) (gpu.Device, func(), error) {
	spec, err := CheckDevice(opts.Device)
	if err != nil {
		return nil, nil, err
	}
	if spec.CUDA {
		return openCUDA(spec.Ordinal, opts.Logger)
	}
	dev, err := cpu.New(cpu.Options{Threads: opts.Threads})
	if err != nil {
		return nil, nil, err
	}
	return dev, dev.Close, nil
}

// logClose adapts a Close that returns an error to a close function that
// logs it.
func logClose(log *slog.Logger, name string, close func() error) func() {
	return func() {
		if err := close(); err != nil {
			log.Warn("closing the compute device", "device", name, "err", err)
		}
	}
}
