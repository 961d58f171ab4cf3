// Package upgrade proves that upgrading handroll rolls nobody's pods: each
// release an upgrade starts from (the latest before this tree, found in its
// history as hack/releases finds it, and the oldest supported, named in the
// file supported), built from a git worktree of it, converges WebApps that
// use every feature on the whole local cluster, then the tree's own build
// replaces it as a user upgrades, CRD first, the two processes overlapping
// on one Lease while a writer keeps writing WebApps through the webhooks.
// Then no Deployment's generation or pod template may have changed, no
// child may have been written, and the WebApps' statuses must be as they
// were.
//
// Its tests take a few minutes, and need the repository's history, so they
// run with `make test-upgrade` (HANDROLL_UPGRADE=1), not `make test`;
// docs/upgrade.md says what they model and what they do not.
package upgrade
