package actors

import (
	"errors"
	"fmt"
)

// BoundarySnapshots is the history-boundary kill switch (troupe serve
// --boundary-snapshots): whether preparers may render history boundaries,
// and with them whether the runtime asks for boundary snapshots at all.
// The zero value is BoundarySnapshotsAuto.
//
// It can only make the capability gate stricter, never looser: with
// BoundarySnapshotsOff no history boundary is rendered on any path, not for
// a snapshot-reuse model and not fail-open while the capability is unknown;
// no next-turn warm-up is prepared unless the model is known to be dense-KV
// (where a warm-up fills KV pages, not a snapshot); and the first of n > 1
// choices stores no shared-prefix snapshot point unless the model is known
// to be dense-KV. Dense-KV prefix sharing, which needs no boundary, and the
// snapshot a snapshot-reuse model stores at the end of a healthy generation
// are untouched. The engine enforces it as well
// (engine.Options.NoBoundarySnapshots), for jobs that reach a scheduler
// prepared elsewhere, as a cluster replica's do.
type BoundarySnapshots string

// The values of BoundarySnapshots.
const (
	// BoundarySnapshotsAuto lets the capability gate decide: boundaries
	// are rendered while the capability is unknown (fail-open) and on
	// snapshot-reuse models, never on dense-KV models after load.
	BoundarySnapshotsAuto BoundarySnapshots = "auto"
	// BoundarySnapshotsOff renders no history boundary anywhere.
	BoundarySnapshotsOff BoundarySnapshots = "off"
)

// ErrBoundarySnapshotsOff answers a warm-up that boundary snapshots being
// off suppressed (BoundarySnapshotsOff on a model not known to be dense-KV).
var ErrBoundarySnapshotsOff = errors.New("boundary snapshots are off (--boundary-snapshots off)")

// ParseBoundarySnapshots reads "auto" or "off" ("" is auto).
func ParseBoundarySnapshots(s string) (BoundarySnapshots, error) {
	switch b := BoundarySnapshots(s); b {
	case "", BoundarySnapshotsAuto:
		return BoundarySnapshotsAuto, nil
	case BoundarySnapshotsOff:
		return b, nil
	}
	return "", fmt.Errorf("boundary snapshots %q: want %q or %q", s, BoundarySnapshotsAuto, BoundarySnapshotsOff)
}

// Off reports whether the switch is off.
func (b BoundarySnapshots) Off() bool { return b == BoundarySnapshotsOff }

// String is "auto" or "off" (the zero value is "auto").
func (b BoundarySnapshots) String() string {
	if b == "" {
		return string(BoundarySnapshotsAuto)
	}
	return string(b)
}

// Set implements flag.Value: it accepts what ParseBoundarySnapshots does.
func (b *BoundarySnapshots) Set(s string) error {
	v, err := ParseBoundarySnapshots(s)
	if err != nil {
		return err
	}
	*b = v
	return nil
}

// Blocks reports whether the switch forbids a boundary snapshot on a model
// of capability c: off blocks every capability that is not known to be
// dense-KV (a dense-KV model keeps its prefix sharing, which is KV pages,
// not a snapshot).
func (b BoundarySnapshots) Blocks(c Capability) bool { return b.Off() && c != DenseKV }
