//go:build !cuda

package main

import (
	"strings"
	"testing"
	"time"
)

// TestServeDeviceFlag: in the default build (no CUDA backend) --device cuda
// is a startup error that says how to get the backend, and a malformed
// --device names what it accepts; both before anything loads.
func TestServeDeviceFlag(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"cuda", []string{"--device", "cuda"}, "--device: device cuda:0: this binary has no CUDA backend; build with -tags cuda"},
		{"cuda:1", []string{"--device", "cuda:1"}, "device cuda:1: this binary has no CUDA backend; build with -tags cuda"},
		{"environment", []string{"TROUPE_DEVICE=cuda:0"}, "this binary has no CUDA backend"},
		{"unknown device", []string{"--device", "tpu"}, `device "tpu": want cpu, cuda or cuda:N`},
		{"bad ordinal", []string{"--device", "cuda:x"}, `device "cuda:x": want cuda:N`},
		{"negative ordinal", []string{"--device", "cuda:-1"}, `device "cuda:-1": want cuda:N`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve", "--port", "0", "--threads", "1", "--kv-budget", "8MiB"}
			if env, ok := strings.CutPrefix(tc.args[0], "TROUPE_DEVICE="); ok {
				t.Setenv("TROUPE_DEVICE", env)
			} else {
				args = append(args, tc.args...)
			}
			done := make(chan error, 1)
			go func() {
				_, err := runCLI(t, args...)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("serve %v: %v, want an error containing %q", tc.args, err, tc.want)
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("serve %v still running after 30s", tc.args)
			}
		})
	}
}
