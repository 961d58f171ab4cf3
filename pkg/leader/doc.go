// Package leader makes one replica of handroll the active one.
//
// Manager piece replaced: the Manager's LeaderElection, LeaderElectionID,
// LeaderElectionNamespace, LeaseDuration, RenewDeadline, RetryPeriod,
// LeaderElectionReleaseOnCancel options and mgr.Elected(), wired by hand on
// client-go's leaderelection.LeaderElector and a coordination.k8s.io/v1
// Lease; plus the leader_election_master_status metric controller-runtime
// registers and the HealthzAdaptor kube-controller-manager serves.
//
// # Using it
//
//	opts := leader.DefaultOptions()
//	opts.AddFlags(fs) // --leader-elect, --leader-elect-resource-name, ...
//	// after parsing:
//	elector, err := leader.New(cfg, opts, registry) // validates opts
//	health.AddLivenessCheck(elector.HealthCheck())
//	// start the informers and wait for them to sync, then:
//	err = elector.Run(ctx, func(ctx context.Context) error {
//		return runControllers(ctx) // returns once they have stopped
//	})
//	switch {
//	case errors.Is(err, leader.ErrLeaseLost):
//		os.Exit(1) // now: do not wait for the controllers
//	case err != nil:
//		return err // the controllers failed, or stopped on their own
//	}
//
// # What each choice is for
//
// Warm standby. Every replica starts its informers and waits for them to
// sync before Run; only the controllers wait for leadership. A standby that
// wins reconciles from a full cache at once instead of listing everything
// first. (The Manager starts its cache on every replica too, but at its
// defaults that cache holds only the informers requested before Start: a
// controller's informers are made when its sources start, on the leader,
// unless config.Controller.EnableWarmup starts them first.)
//
// One leader, never two. client-go's election is not fenced: nothing stops
// a replica that believes it leads from writing. So a leader that cannot
// renew within the renew deadline stops at once: Run returns ErrLeaseLost
// and the process must exit non-zero without draining, because its
// in-flight writes cannot be cancelled and a standby may take over one lease
// duration after the last renewal. Validate refuses durations where the
// leader would give up later than that (see Options.Validate).
//
// Fast handover. On a graceful stop Run cancels the work, waits for
// onStartedLeading to return (the elector keeps renewing meanwhile), then
// empties the Lease, so a standby takes over within a retry period rather
// than a lease duration. The release is done here rather than by client-go's
// ReleaseOnCancel, which would also delay the lost-lease exit (see Run).
//
// Renewals are not starved. The elector has its own rest.Config: its own
// rate limiter, a request timeout of one retry period (at least a second;
// Options.RequestTimeout), and its own user agent; a busy controller or a slow API server cannot hold a renewal
// back until the deadline passes.
//
// Identity. hostname_uuid (NewIdentity): readable, and unique per process.
//
// Metrics. leader_election_master_status{name=<Lease name>} is 1 on the
// leader and 0 on standbys and after leadership ends;
// leader_election_slowpath_total counts renewals that had to re-read the
// Lease. client-go's provider is process-wide: one Elector per Lease name
// per process.
package leader
