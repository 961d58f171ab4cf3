// Package upgrade proves that upgrading handroll rolls nobody's pods: the
// previous release (named in the file previous-release, built from a git
// worktree of it) converges WebApps that use every feature on the whole
// local cluster, then the tree's own build replaces it as a user upgrades,
// CRD first, the two processes overlapping on one Lease while a writer keeps
// writing WebApps through the webhooks. Then no Deployment's generation or
// pod template may have changed, no child may have been written, and the
// WebApps' statuses must be as they were.
//
// Its test takes a minute or two, and needs the repository's history, so it
// runs with `make test-upgrade` (HANDROLL_UPGRADE=1), not `make test`;
// docs/upgrade.md says what it models and what it does not.
package upgrade
