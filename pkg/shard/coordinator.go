package shard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
)

// Coordinator runs this replica's share of the ranges. Every Interval it
// reads the live members, computes Assign, and for each range assigned to
// it runs an election on that range's own Lease, with Work as the leader's
// callback; a range no longer assigned has its Work stopped, after which
// its Lease is released for the replica it now belongs to.
//
// The Lease of a range fences it exactly as the single leader's Lease
// fences today's controllers (pkg/leader): a replica that cannot renew a
// range stops at once, and Run returns leader.ErrLeaseLost, on which the
// process must exit without draining.
type Coordinator struct {
	Ranges  []Range
	Members *Members
	// Election is the options of every range's election; LeaseName is
	// replaced by RangeLease's.
	Election leader.Options
	// NewElector builds an elector for opts (leader.New, with the process's
	// rest.Config and registry).
	NewElector func(opts leader.Options) (*leader.Elector, error)
	// Work runs r's controllers until ctx ends, and returns once they have
	// stopped.
	Work func(ctx context.Context, r Range) error
	// Interval is how often the members are read.
	Interval time.Duration
	Metrics  *Metrics

	mu       sync.Mutex
	electors map[int]*leader.Elector // of the ranges being elected or held
}

// RangeLease is the Lease of range r: its count is in the name, so that a
// restart with another --shards never shares a Lease across a different
// split.
func RangeLease(group string, r Range) string {
	return fmt.Sprintf("%s-shard-%d-of-%d", group, r.Index, r.Count)
}

// GroupLease tells whether name is one of the Leases that group's replicas
// make: a range's (RangeLease) or a member's (Members.leaseName). An
// uninstall deletes them.
func GroupLease(group, name string) bool {
	return strings.HasPrefix(name, group+"-shard-") || strings.HasPrefix(name, group+"-member-")
}

type running struct {
	cancel context.CancelFunc
	done   chan struct{}
}

type rangeResult struct {
	r         Range
	err       error
	cancelled bool // by us: a hand-over or the stop
}

// Run coordinates until ctx ends, then leaves the membership and stops
// every range's work, releasing each range's Lease once its work is done.
// It returns the first ErrLeaseLost or ErrWorkStillRunning at once, even
// while it stops (the process must exit before another replica takes
// that range: leader.Unfenced); else the errors the ranges' work returned,
// nil for none.
func (c *Coordinator) Run(ctx context.Context) error {
	if len(c.Ranges) == 0 || c.Members == nil || c.Work == nil || c.NewElector == nil || c.Interval <= 0 {
		return errors.New("shard.Coordinator needs ranges, members, an elector, work and an interval")
	}
	membersCtx, leave := context.WithCancel(context.WithoutCancel(ctx))
	membersDone := make(chan error, 1)
	go func() { membersDone <- c.Members.Run(membersCtx) }()
	run := &coordination{
		c:           c,
		logger:      klog.FromContext(ctx).WithValues("identity", c.Members.Identity),
		held:        map[int]*running{},
		results:     make(chan rangeResult, len(c.Ranges)),
		leave:       leave,
		membersDone: membersDone,
	}

	// The members are read in a goroutine of their own: a list that hangs
	// on a partitioned link must not delay the reaction to a lost range.
	views := make(chan membersView, 1)
	go c.watchMembers(ctx, views)
	for {
		select {
		case <-ctx.Done():
			return run.stopAll()
		case res := <-run.results:
			if done, err := run.ended(res); done {
				return err
			}
		case view := <-views:
			if err := run.follow(ctx, view); err != nil {
				return err
			}
		}
	}
}

// coordination is one Run's state: the ranges held and how their
// elections end.
type coordination struct {
	c           *Coordinator
	logger      klog.Logger
	held        map[int]*running
	results     chan rangeResult
	wg          sync.WaitGroup
	leave       context.CancelFunc // ends the membership
	membersDone <-chan error
}

// unfenced is res's error as Run returns it when its range can no longer
// be fenced (leader.Unfenced), else nil.
func unfenced(res rangeResult) error {
	switch {
	case errors.Is(res.err, leader.ErrLeaseLost):
		return res.err // no draining: another replica may hold it already
	case errors.Is(res.err, leader.ErrWorkStillRunning):
		// Its Lease is kept, but expires: the process must be gone by
		// then, so no draining of the others either.
		return fmt.Errorf("range %v: %w", res.r, res.err)
	}
	return nil
}

// ended handles a range's election ending while Run coordinates. done
// says that Run must return err: the range is unfenced, or its work
// stopped on its own, which stops every range. A hand-over is not done.
func (s *coordination) ended(res rangeResult) (done bool, err error) {
	h := s.held[res.r.Index]
	delete(s.held, res.r.Index)
	<-h.done
	if err := unfenced(res); err != nil {
		return true, err
	}
	switch {
	case !res.cancelled:
		return true, errors.Join(fmt.Errorf("range %v: %w", res.r, res.err), s.stopAll())
	case res.err != nil:
		// Handed over; its Lease was released once the work ended.
		s.logger.Error(res.err, "The range's work ended with an error on its hand-over", "range", res.r)
	}
	return false, nil
}

// follow hands over the ranges view no longer assigns to this replica and
// starts those it newly does.
func (s *coordination) follow(ctx context.Context, view membersView) error {
	c := s.c
	live := view.live
	if !slices.Contains(live, c.Members.Identity) {
		// Until its own Lease is listed, a replica that starts with
		// another split could list before it, and take ranges too.
		return nil
	}
	want := Assign(len(c.Ranges), live)[c.Members.Identity]
	if len(view.otherSplit) > 0 {
		// Their range Leases are not ours: hold none until they go.
		s.logger.Error(nil, "Members split the WebApps otherwise; holding no range until they are gone", "members", view.otherSplit, "split", c.Members.Split)
		want = nil
	}
	for i, h := range s.held {
		if !slices.Contains(want, i) {
			s.logger.Info("Handing the range over", "range", c.Ranges[i], "members", live)
			h.cancel()
		}
	}
	for _, i := range want {
		if _, ok := s.held[i]; ok {
			continue
		}
		h, err := c.start(ctx, c.Ranges[i], s.results, &s.wg)
		if err != nil {
			return errors.Join(err, s.stopAll())
		}
		s.held[i] = h
	}
	return nil
}

// stopAll leaves the membership first, so that the others take each range
// as soon as its own work has drained and its Lease is released, not once
// the slowest range has: the range Leases, still renewed while their work
// drains, fence them meanwhile. A range that cannot be fenced any more
// ends it at once, without waiting for the others.
func (s *coordination) stopAll() error {
	for _, h := range s.held {
		h.cancel()
	}
	s.leave()
	if err := <-s.membersDone; err != nil {
		// The others drop it after Members.Duration instead.
		s.logger.Error(err, "Leaving the shard members")
	}
	var errs []error
	for len(s.held) > 0 {
		res := <-s.results
		delete(s.held, res.r.Index)
		if err := unfenced(res); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if res.err != nil {
			errs = append(errs, fmt.Errorf("range %v: %w", res.r, res.err))
		}
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// membersView is one reading of the members.
type membersView struct {
	live, otherSplit []string
}

// watchMembers sends the live members every Interval until ctx ends,
// replacing a view not yet read by a newer one.
func (c *Coordinator) watchMembers(ctx context.Context, views chan membersView) {
	logger := klog.FromContext(ctx)
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	for {
		live, otherSplit, err := c.Members.live(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Error(err, "Reading the shard members; keeping the ranges held")
		}
		if err == nil {
			select {
			case <-views: // drop the unread, older view
			default:
			}
			views <- membersView{live: live, otherSplit: otherSplit}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// start runs the election of r in a goroutine until its context is
// cancelled or the election ends; how it ended is sent to results.
func (c *Coordinator) start(ctx context.Context, r Range, results chan<- rangeResult, wg *sync.WaitGroup) (*running, error) {
	opts := c.Election
	opts.LeaseName = RangeLease(c.Members.Group, r)
	opts.Identity = c.Members.Identity
	e, err := c.NewElector(opts)
	if err != nil {
		return nil, fmt.Errorf("range %v: %w", r, err)
	}
	c.track(r, e)
	rctx, cancel := context.WithCancel(ctx)
	h := &running{cancel: cancel, done: make(chan struct{})}
	wg.Go(func() {
		defer close(h.done)
		defer c.track(r, nil)
		err := e.Run(rctx, func(leading context.Context) error {
			c.Metrics.held(r, true)
			defer c.Metrics.held(r, false)
			return c.Work(leading, r)
		})
		results <- rangeResult{r: r, err: err, cancelled: rctx.Err() != nil}
	})
	return h, nil
}

func (c *Coordinator) track(r Range, e *leader.Elector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e == nil {
		delete(c.electors, r.Index)
		return
	}
	if c.electors == nil {
		c.electors = map[int]*leader.Elector{}
	}
	c.electors[r.Index] = e
}

// HealthCheck is the ranges' counterpart of the single leader's
// leader-election check, for /healthz: it fails while any range's elector
// holds its Lease without having renewed it for longer than the Lease
// duration and a tolerance (leaderelection.HealthzAdaptor), a replica
// whose range electors are stuck.
func (c *Coordinator) HealthCheck() server.Check {
	return server.Check{Name: "shard-leader-election", Check: func(req *http.Request) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		var errs []error
		for i, e := range c.electors {
			if err := e.HealthCheck().Check(req); err != nil {
				errs = append(errs, fmt.Errorf("range %v: %w", c.Ranges[i], err))
			}
		}
		return errors.Join(errs...)
	}}
}

// Metrics are the coordinator's: the ranges held, and the hand-overs.
type Metrics struct {
	rangesHeld prometheus.Gauge
	acquired   prometheus.Counter
}

// NewMetrics registers handroll_shard_ranges_held and
// handroll_shard_range_acquisitions_total in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		rangesHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "handroll_shard_ranges_held",
			Help: "Ranges of WebApps this replica holds the Lease of and reconciles.",
		}),
		acquired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "handroll_shard_range_acquisitions_total",
			Help: "Times this replica took over a range: at start, after a hand-over or a replica's loss.",
		}),
	}
	for _, c := range []prometheus.Collector{m.rangesHeld, m.acquired} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) held(_ Range, on bool) {
	if m == nil {
		return
	}
	if on {
		m.rangesHeld.Inc()
		m.acquired.Inc()
		return
	}
	m.rangesHeld.Dec()
}
