package leader

import "errors"

// Unfenced tells whether err says that a Lease no longer fences this
// process's writes: it was lost (ErrLeaseLost), or it is kept unrenewed
// for work still running past its drain (ErrWorkStillRunning).
//
// It is the stop rule of the single leader (Run), of each range of
// --shards (shard.Coordinator) and of the process (cmd/handroll's
// stopper, whether a signal or the controllers' own end began the stop):
//
//   - a graceful stop cancels the work, waits for it to drain, releases
//     the Lease, then flushes the events and stops the informers and the
//     servers, all within --graceful-shutdown-timeout;
//   - an unfenced stop ends at once, in whatever phase: nothing else is
//     drained, no Lease released, no Event written, and the process exits
//     non-zero before a standby may lead (TestAnUnfencedStopEndsAtOnce).
func Unfenced(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrWorkStillRunning)
}
