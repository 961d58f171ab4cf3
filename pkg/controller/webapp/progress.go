package webapp

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

// DefaultProgressWriteInterval is handroll's ProgressWrites.Interval: while
// a rollout goes, a WebApp's replica counts and messages are written at
// most about once a second, however many times its Deployment reports.
const DefaultProgressWriteInterval = time.Second

// DefaultFirstStatusGrace is handroll's ProgressWrites.FirstGrace: a new
// WebApp whose rollout ends within this time of its creation gets one
// status write, Ready, instead of one saying the rollout is under way and
// another when it ends.
const DefaultFirstStatusGrace = 3 * time.Second

// ProgressOnly tells whether status differs from current only in what
// reports a rollout's progress: the replica counts and the conditions'
// messages. Every condition keeps its status, reason and observed
// generation, and none comes or goes, so kstatus, Flux, Argo CD and the
// Ready events read the same WebApp either way.
func ProgressOnly(current, status handrollv1.WebAppStatus) bool {
	if current.ObservedGeneration != status.ObservedGeneration || current.URL != status.URL ||
		current.Selector != status.Selector || len(current.Conditions) != len(status.Conditions) {
		return false
	}
	for i, c := range status.Conditions {
		was := current.Conditions[i]
		if was.Type != c.Type || was.Status != c.Status || was.Reason != c.Reason || was.ObservedGeneration != c.ObservedGeneration {
			return false
		}
	}
	return true
}

// ProgressWrites paces the status writes that only report progress
// (ProgressOnly): at most one per WebApp per Interval. A Deployment of
// many replicas reports each pod it starts or readies, and each report
// would otherwise be a write of its WebApp's status; a write that changes
// a condition is never held. It remembers the writes of the last two
// intervals only, so it holds nothing for a WebApp at rest.
type ProgressWrites struct {
	// Interval is the least time between two writes of a WebApp's status
	// when the second only reports progress. Zero: none is held.
	Interval time.Duration
	// FirstGrace is how long after its creation a WebApp's first status
	// waits while all it would say is that the rollout is under way (see
	// HoldFirst). Zero: none waits.
	FirstGrace time.Duration

	mu        sync.Mutex
	cur, prev map[types.NamespacedName]time.Time
	rotated   time.Time // when prev took cur's place
}

// Hold returns how long the write of status over current is to wait: zero
// to write it now. Whoever holds a write requeues the WebApp for then. A
// nil p holds nothing.
func (p *ProgressWrites) Hold(key types.NamespacedName, current, status handrollv1.WebAppStatus, now time.Time) time.Duration {
	if p == nil || p.Interval <= 0 || !ProgressOnly(current, status) {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rotate(now)
	last, ok := p.cur[key]
	if !ok {
		last, ok = p.prev[key]
	}
	if wait := p.Interval - now.Sub(last); ok && wait > 0 {
		return wait
	}
	return 0
}

// HoldFirst returns how long the first status of a WebApp created at
// created is to wait: while it would only say that the rollout is under
// way (Reconciling, nothing Stalled or Degraded, not Ready), until
// FirstGrace after the creation. A rollout that ends within the grace
// then costs one write, Ready; a slower one is reported as under way when
// the grace ends. Until its first status the WebApp reads as in progress
// all the same: the CRD defaults status.observedGeneration to 0, which
// kstatus and the Argo CD health check read as not yet observed. Both
// clocks are read as they are: a creation in the future (the API server's
// clock ahead of ours) holds nothing, so no skew makes the hold longer
// than FirstGrace. A nil p holds nothing.
func (p *ProgressWrites) HoldFirst(created time.Time, current, status handrollv1.WebAppStatus, now time.Time) time.Duration {
	if p == nil || p.FirstGrace <= 0 || len(current.Conditions) > 0 || !underWay(status) {
		return 0
	}
	if age := now.Sub(created); age >= 0 && age < p.FirstGrace {
		return p.FirstGrace - age
	}
	return 0
}

// underWay tells whether status only says that a rollout is under way:
// nothing a person may have to act on, nothing done yet.
func underWay(status handrollv1.WebAppStatus) bool {
	c := status.Conditions
	return meta.IsStatusConditionTrue(c, handrollv1.ConditionReconciling) &&
		!meta.IsStatusConditionTrue(c, handrollv1.ConditionStalled) &&
		!meta.IsStatusConditionTrue(c, handrollv1.ConditionDegraded) &&
		!meta.IsStatusConditionTrue(c, handrollv1.ConditionReady)
}

// Wrote records a write of key's status at now.
func (p *ProgressWrites) Wrote(key types.NamespacedName, now time.Time) {
	if p == nil || p.Interval <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rotate(now)
	if p.cur == nil {
		p.cur = map[types.NamespacedName]time.Time{}
	}
	p.cur[key] = now
}

// rotate drops the writes older than an interval, a set at a time: every
// interval or more, cur becomes prev and the older prev goes. A write made
// in cur is older than an interval when prev goes, and all of cur is when
// two intervals have passed since the last turn.
func (p *ProgressWrites) rotate(now time.Time) {
	since := now.Sub(p.rotated)
	if since < p.Interval {
		return
	}
	p.prev = p.cur
	if since >= 2*p.Interval {
		p.prev = nil
	}
	p.cur, p.rotated = nil, now
}
