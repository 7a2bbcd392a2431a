package troupe

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want DeviceSpec
		err  string
	}{
		{"", DeviceSpec{}, ""},
		{"cpu", DeviceSpec{}, ""},
		{"cuda", DeviceSpec{CUDA: true}, ""},
		{"cuda:0", DeviceSpec{CUDA: true}, ""},
		{"cuda:3", DeviceSpec{CUDA: true, Ordinal: 3}, ""},
		{"cuda:", DeviceSpec{}, "want cuda:N"},
		{"cuda:-1", DeviceSpec{}, "want cuda:N"},
		{"cuda:01", DeviceSpec{}, "want cuda:N"},
		{"cuda:x", DeviceSpec{}, "want cuda:N"},
		{"gpu", DeviceSpec{}, "want cpu, cuda or cuda:N"},
		{"cpu:0", DeviceSpec{}, "want cpu, cuda or cuda:N"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseDevice(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ParseDevice(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseDevice(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if back, err := ParseDevice(got.String()); err != nil || back != got {
				t.Errorf("ParseDevice(%q) = %v, %v: String does not round-trip", got.String(), back, err)
			}
		})
	}
}

// TestCheckDevice: the CPU is always there; a CUDA device only in a binary
// built with -tags cuda.
func TestCheckDevice(t *testing.T) {
	if _, err := CheckDevice("cpu"); err != nil {
		t.Fatal(err)
	}
	_, err := CheckDevice("cuda:1")
	if cudaBuilt {
		if err != nil {
			t.Fatalf("CheckDevice(cuda:1) in a CUDA build: %v", err)
		}
		return
	}
	if !errors.Is(err, ErrNoCUDA) || err.Error() != "device cuda:1: this binary has no CUDA backend; build with -tags cuda" {
		t.Fatalf("CheckDevice(cuda:1) without CUDA: %v", err)
	}
	if _, _, err := openDevice(Options{Device: "cuda"}); !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("openDevice(cuda) without CUDA: %v", err)
	}
}
