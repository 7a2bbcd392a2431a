// Package actors is troupe's actor pipeline on protoactor-go: a ModelActor
// that loads a checkpoint and publishes its prompt-cache capability, a pool
// of RequestPreparers that render and tokenize requests, and a
// SchedulerActor that owns the engine, the compute device and the KV pool.
//
// The capability gate is the point of the shape. The ModelActor loads the
// tokenizer and template first and hands them to every preparer, so requests
// are prepared while the weights still load; preparers render the history
// boundary while the capability is unknown (fail-open: a request queued
// during load must still carry its boundary). Once the weights are loaded the
// ModelActor sends CapabilityReady to every preparer and waits for all
// acknowledgements before it reports ready; from then on preparers of a
// dense-KV model never render the boundary, and those of a snapshot-reuse
// model always do. A preparer (re)started later registers with the
// ModelActor and receives the assets and capability before it prepares
// anything.
//
// BoundarySnapshots (troupe serve --boundary-snapshots) is a kill switch on
// top of the gate, given to every preparer when it is spawned: off renders
// no history boundary at all, not fail-open while the capability is unknown
// and not on snapshot-reuse models (counted as history_renders_total
// {outcome="disabled"}), and refuses next-turn warm-ups on any model not
// known to be dense-KV (ErrBoundarySnapshotsOff). The SchedulerActor's
// engine gets it too (engine.Options.NoBoundarySnapshots): on a snapshot
// cache it ignores the boundaries of jobs prepared elsewhere (a cluster
// gateway's) and drops warm-ups. It can only make the gate stricter; auto
// is the gate alone.
//
// Actors own state and ordering only: preparation is chat.Assets.Prepare,
// batching is engine.Engine. The SchedulerActor runs one engine step per
// Step message it sends itself, so jobs, cancellations and stats queries are
// handled between steps. Messages that may cross nodes are protobuf types
// (messages.proto); the rest (assets, the loaded model) stay on one node.
package actors
