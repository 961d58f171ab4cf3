// Package leader makes one replica of handroll the active one.
//
// Manager piece replaced: the Manager's LeaderElection, LeaderElectionID,
// LeaseDuration, RenewDeadline, RetryPeriod, ReleaseOnCancel options and
// mgr.Elected(), wired by hand on client-go's leaderelection.LeaderElector
// and a coordination.k8s.io Lease.
package leader
