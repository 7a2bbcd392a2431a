package hub

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress hears about each file download. Start and Finish come in pairs,
// one file at a time; Add reports bytes written since the last call.
type Progress interface {
	// Start begins a file of total bytes of which have are already on disk
	// (a resumed download).
	Start(file string, total, have int64)
	// Add counts n more bytes written.
	Add(n int64)
	// Finish ends the file; err is nil when it is complete.
	Finish(err error)
}

// ReporterOptions shape a Reporter.
type ReporterOptions struct {
	// Terminal draws one bar redrawn in place (with \r); otherwise plain
	// lines are written, one every Interval, for logs.
	Terminal bool
	// Interval between plain lines (default 5s) or bar redraws (default
	// 100ms).
	Interval time.Duration
	// Now is the clock (default time.Now); tests step it.
	Now func() time.Time
}

// Reporter is a Progress that writes to an io.Writer: a progress bar on a
// terminal, periodic lines ("file: bytes/total (pct) rate") otherwise, and
// one line when each file ends.
type Reporter struct {
	w        io.Writer
	terminal bool
	interval time.Duration
	now      func() time.Time

	mu          sync.Mutex
	file        string
	total, done int64
	resumed     int64
	start, last time.Time
}

// NewReporter returns a Reporter writing to w.
func NewReporter(w io.Writer, opt ReporterOptions) *Reporter {
	r := &Reporter{w: w, terminal: opt.Terminal, interval: opt.Interval, now: opt.Now}
	if r.now == nil {
		r.now = time.Now
	}
	if r.interval <= 0 {
		r.interval = 5 * time.Second
		if r.terminal {
			r.interval = 100 * time.Millisecond
		}
	}
	return r
}

// Start implements Progress.
func (r *Reporter) Start(file string, total, have int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.file, r.total, r.done, r.resumed = file, total, have, have
	r.start = r.now()
	r.last = r.start
	if r.terminal {
		r.draw()
	} else if have > 0 {
		fmt.Fprintf(r.w, "%s: resuming at %s of %s\n", file, size(have), size(total))
	}
}

// Add implements Progress.
func (r *Reporter) Add(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done += n
	if now := r.now(); now.Sub(r.last) >= r.interval {
		r.last = now
		if r.terminal {
			r.draw()
		} else {
			fmt.Fprintf(r.w, "%s: %s\n", r.file, r.status(now))
		}
	}
}

// Finish implements Progress.
func (r *Reporter) Finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if r.terminal {
		r.draw()
		io.WriteString(r.w, "\n")
	}
	if err != nil {
		fmt.Fprintf(r.w, "%s: failed at %s of %s\n", r.file, size(r.done), size(r.total))
		return
	}
	if !r.terminal {
		fmt.Fprintf(r.w, "%s: %s done in %s (%s)\n", r.file, size(r.done), now.Sub(r.start).Round(100*time.Millisecond), r.rate(now))
	}
}

// status is "bytes/total (pct) rate".
func (r *Reporter) status(now time.Time) string {
	pct := ""
	if r.total > 0 {
		pct = fmt.Sprintf(" (%d%%)", r.done*100/r.total)
	}
	return fmt.Sprintf("%s/%s%s %s", size(r.done), size(r.total), pct, r.rate(now))
}

// rate is the average speed of this run's part of the download.
func (r *Reporter) rate(now time.Time) string {
	secs := now.Sub(r.start).Seconds()
	if secs <= 0 {
		return "-"
	}
	return size(int64(float64(r.done-r.resumed)/secs)) + "/s"
}

// draw redraws the terminal bar in place.
func (r *Reporter) draw() {
	const width = 24
	fill := 0
	if r.total > 0 {
		fill = int(r.done * width / r.total)
	}
	fill = min(max(fill, 0), width)
	name := r.file
	if len(name) > 32 {
		name = "…" + name[len(name)-31:]
	}
	fmt.Fprintf(r.w, "\r%-32s [%s%s] %s\x1b[K", name, strings.Repeat("=", fill), strings.Repeat(" ", width-fill), r.status(r.now()))
}

// size writes a byte count with a binary unit.
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n), 0
	for v >= unit && u < 4 {
		v /= unit
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[u-1])
}
