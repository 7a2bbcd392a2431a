package hub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// clock is a test clock the reporter reads; step moves it.
type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                { return &clock{t: time.Unix(1e9, 0)} }

// TestReporterPlain: off a terminal, one line per interval with file,
// bytes/total, percentage and rate, and one line when the file ends.
func TestReporterPlain(t *testing.T) {
	var out strings.Builder
	clk := newClock()
	r := NewReporter(&out, ReporterOptions{Interval: 5 * time.Second, Now: clk.now})
	r.Start("model.safetensors", 4<<20, 0)
	for range 8 { // 8 × 512 KiB, one per second
		clk.step(time.Second)
		r.Add(512 << 10)
	}
	r.Finish(nil)
	want := "model.safetensors: 2.5 MiB/4.0 MiB (62%) 512.0 KiB/s\n" +
		"model.safetensors: 4.0 MiB done in 8s (512.0 KiB/s)\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}

	out.Reset()
	r.Start("model.safetensors", 4<<20, 1<<20)
	clk.step(time.Second)
	r.Add(1 << 20)
	r.Finish(errors.New("cut"))
	want = "model.safetensors: resuming at 1.0 MiB of 4.0 MiB\nmodel.safetensors: failed at 2.0 MiB of 4.0 MiB\n"
	if out.String() != want {
		t.Errorf("resumed and failed: got\n%s\nwant\n%s", out.String(), want)
	}
}

// TestReporterTerminal: on a terminal the bar is redrawn in place and ends
// with a newline.
func TestReporterTerminal(t *testing.T) {
	var out strings.Builder
	clk := newClock()
	r := NewReporter(&out, ReporterOptions{Terminal: true, Now: clk.now})
	r.Start("config.json", 1000, 0)
	clk.step(time.Second)
	r.Add(500)
	r.Finish(nil)
	s := out.String()
	if strings.Count(s, "\r") != 3 || !strings.HasSuffix(s, "\n") || strings.Count(s, "\n") != 1 {
		t.Errorf("not a bar redrawn in place: %q", s)
	}
	if !strings.Contains(s, "[============            ] 500 B/1000 B (50%)") {
		t.Errorf("the bar at half: %q", s)
	}
}

// TestPullReports: a Pull with a Reporter reports each downloaded file, and
// nothing for cached ones.
func TestPullReports(t *testing.T) {
	f := newFixture(t)
	f.srv.AddRepo("acme/tiny", modelFiles())
	var out strings.Builder
	c := f.client(t)
	c.progress = NewReporter(&out, ReporterOptions{})
	if _, err := c.Pull(context.Background(), "acme/tiny", ""); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		if !strings.Contains(out.String(), name+": ") || !strings.Contains(out.String(), " done in ") {
			t.Errorf("no line for %s:\n%s", name, out.String())
		}
	}
	out.Reset()
	if _, err := c.Pull(context.Background(), "acme/tiny", ""); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Errorf("a cached model reported downloads:\n%s", out.String())
	}
}
