package actors

// Answers and token events reach a requester that may have gone (a client
// that disconnected, a future that timed out): that is normal traffic, not
// a fault worth a log line each, so these messages opt out of
// protoactor's dead-letter log (actor.IgnoreDeadLetterLogging).

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (*TokenEvent) IgnoreDeadLetterLogging() {}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (*Prepared) IgnoreDeadLetterLogging() {}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (*SchedulerStats) IgnoreDeadLetterLogging() {}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (*CacheProbeResult) IgnoreDeadLetterLogging() {}

// IgnoreDeadLetterLogging implements actor.IgnoreDeadLetterLogging.
func (*LoadStatus) IgnoreDeadLetterLogging() {}
