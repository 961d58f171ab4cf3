package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	handrollinformers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
)

// namespacePrefix starts the name of every namespace the bench creates; the
// tracker ignores objects elsewhere.
const namespacePrefix = "bench-"

// app is what the tracker knows of one WebApp and its children.
type app struct {
	exists      bool // the WebApp itself has been seen
	wantConfig  bool // spec.config is set, so a ConfigMap is a child
	generation  int64
	observed    int64 // status.observedGeneration
	deployment  bool
	replicas    int32 // the Deployment's spec.replicas
	service     bool
	configMap   bool
	resourceVer string

	// statusReady: the status says Ready for the current generation.
	statusReady bool
	// podsReady: the Deployment's status has every replica of its current
	// generation ready (kube-controller-manager's report of the pods), since
	// podsReadyAt, when the bench saw it.
	podsReady   bool
	podsReadyAt time.Time
	// lagPending: the status said Ready before the bench saw the pods
	// ready; the lag is counted as 0 when it does.
	lagPending bool
}

// converged is the bench's definition of applied, the operator's own
// work: the status reports the current generation and every child exists.
func (a *app) converged() bool {
	return a.exists && a.generation > 0 && a.observed == a.generation &&
		a.deployment && a.service && (a.configMap || !a.wantConfig)
}

// ready is what a user waits for: converged, and the status says Ready,
// which needs every replica ready, so the cluster's controllers.
func (a *app) ready() bool { return a.converged() && a.statusReady }

// runState is the set of namespaces one measurement is about, and what
// has happened in them.
type runState struct {
	namespaces  map[string]bool
	want        int
	converged   int
	ready       int
	seen        int       // WebApps that exist
	convergedAt time.Time // when converged last reached want
	readyAt     time.Time // when ready last reached want
	firstWrite  time.Time // first write by someone other than the bench
	// readyLags are, for each WebApp that became ready, the time from its
	// Deployment reporting every replica ready to its status saying Ready:
	// the operator's own share of the wait.
	readyLags []time.Duration
}

// lease is what the tracker last saw of a Lease.
type lease struct {
	holder     string
	acquire    time.Time // spec.acquireTime, written by the holder
	observedAt time.Time
}

type appWaiter struct {
	key  string
	pred func(*app) bool
	ch   chan time.Time
}

type leaseWaiter struct {
	name string
	pred func(lease) bool
	ch   chan lease
}

// tracker follows WebApps, their children and the Leases through informers
// (watches), so that every time it reports is the moment an event arrived,
// not the tick of a poll.
type tracker struct {
	mu           sync.Mutex
	apps         map[string]*app // namespace/name
	run          *runState
	appWaiters   []*appWaiter
	leases       map[string]lease
	leaseWaiters []*leaseWaiter
	changed      chan struct{} // closed and replaced on each change of the run
}

func newTracker() *tracker {
	return &tracker{apps: map[string]*app{}, leases: map[string]lease{}, changed: make(chan struct{})}
}

// start runs the informers until ctx ends and waits for their first list.
// Leases are watched in leaseNamespace only.
func (t *tracker) start(ctx context.Context, kube kubernetes.Interface, client clientset.Interface, leaseNamespace string) error {
	// The bench needs only the fields of app and lease: dropping
	// managedFields keeps its memory, which shares the machine, small.
	strip := func(obj any) (any, error) {
		if m, err := meta.Accessor(obj); err == nil {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}
	// Children only: every contender labels what it creates, and the
	// unrelated objects (128 MiB of ConfigMaps) are not the bench's to hold.
	ours := informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = webapp.LabelManagedBy + "=" + webapp.ManagedBy
	})
	kf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(strip), ours)
	hf := handrollinformers.NewSharedInformerFactoryWithOptions(client, 0, handrollinformers.WithTransform(strip))
	lf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(leaseNamespace))

	handlers := []struct {
		informer cache.SharedIndexInformer
		on       func(obj any, deleted, added bool)
	}{
		{hf.Handroll().V1().WebApps().Informer(), t.onWebApp},
		{kf.Apps().V1().Deployments().Informer(), t.onDeployment},
		{kf.Core().V1().Services().Informer(), t.onService},
		{kf.Core().V1().ConfigMaps().Informer(), t.onConfigMap},
		{lf.Coordination().V1().Leases().Informer(), t.onLease},
	}
	for _, h := range handlers {
		_, err := h.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { h.on(obj, false, true) },
			UpdateFunc: func(_, obj any) { h.on(obj, false, false) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				h.on(obj, true, false)
			},
		})
		if err != nil {
			return err
		}
	}
	kf.Start(ctx.Done())
	hf.Start(ctx.Done())
	lf.Start(ctx.Done())
	for _, synced := range []map[string]bool{
		typeNames(kf.WaitForCacheSync(ctx.Done())),
		typeNames(hf.WaitForCacheSync(ctx.Done())),
		typeNames(lf.WaitForCacheSync(ctx.Done())),
	} {
		for name, ok := range synced {
			if !ok {
				return fmt.Errorf("the bench's %s informer did not sync", name)
			}
		}
	}
	return nil
}

func typeNames[K interface {
	comparable
	fmt.Stringer
}](m map[K]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		out[k.String()] = v
	}
	return out
}

// update applies change to the app at namespace/name under the lock, then
// keeps the run's counters and the waiters current. change reports whether
// the event is a contender's write, as opposed to the bench's own create,
// spec change or clean-up.
func (t *tracker) update(namespace, name string, change func(*app) (written bool)) {
	if !strings.HasPrefix(namespace, namespacePrefix) {
		return
	}
	now := time.Now()
	key := namespace + "/" + name
	t.mu.Lock()
	defer t.mu.Unlock()
	a := t.apps[key]
	if a == nil {
		a = &app{}
		t.apps[key] = a
	}
	wasConverged, wasReady, wasPodsReady, existed := a.converged(), a.ready(), a.podsReady, a.exists
	written := change(a)
	if a.podsReady && !wasPodsReady {
		a.podsReadyAt = now
	}
	if !a.exists && !a.deployment && !a.service && !a.configMap {
		delete(t.apps, key)
	}

	if r := t.run; r != nil && r.namespaces[namespace] {
		if is := a.converged(); is != wasConverged {
			if is {
				r.converged++
				if r.converged == r.want {
					r.convergedAt = now
				}
			} else {
				r.converged--
			}
		}
		if is := a.ready(); is != wasReady {
			if is {
				r.ready++
				if r.ready == r.want {
					r.readyAt = now
				}
				if a.podsReady {
					r.readyLags = append(r.readyLags, now.Sub(a.podsReadyAt))
				} else {
					a.lagPending = true
				}
			} else {
				r.ready--
			}
		}
		if a.lagPending && a.podsReady {
			// Two watches: the status's event reached the bench first.
			r.readyLags = append(r.readyLags, 0)
			a.lagPending = false
		}
		if a.exists != existed {
			if a.exists {
				r.seen++
			} else {
				r.seen--
			}
		}
		if written && r.firstWrite.IsZero() {
			r.firstWrite = now
		}
		close(t.changed)
		t.changed = make(chan struct{})
	}

	kept := t.appWaiters[:0]
	for _, w := range t.appWaiters {
		if w.key == key && w.pred(a) {
			w.ch <- now
			continue
		}
		kept = append(kept, w)
	}
	t.appWaiters = kept
}

func (t *tracker) onWebApp(obj any, deleted, added bool) {
	w, ok := obj.(*handrollv1.WebApp)
	if !ok {
		return
	}
	t.update(w.Namespace, w.Name, func(a *app) bool {
		if deleted {
			a.exists = false
			return false
		}
		// The bench creates WebApps and changes a spec (which bumps the
		// generation); any other change is a contender's write: a
		// finalizer, a status.
		written := !added && a.exists && a.resourceVer != w.ResourceVersion && w.Generation == a.generation
		a.exists, a.wantConfig = true, len(w.Spec.Config) > 0
		a.generation, a.observed, a.resourceVer = w.Generation, w.Status.ObservedGeneration, w.ResourceVersion
		ready := meta.FindStatusCondition(w.Status.Conditions, handrollv1.ConditionReady)
		a.statusReady = ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == w.Generation
		return written
	})
}

func (t *tracker) onDeployment(obj any, deleted, _ bool) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	t.update(d.Namespace, d.Name, func(a *app) bool {
		a.deployment = !deleted
		if d.Spec.Replicas != nil {
			a.replicas = *d.Spec.Replicas
		}
		// What the operators' status requires of the Deployment to say
		// Ready (webapp.ComputeStatus): rolled out, every replica ready.
		st := d.Status
		a.podsReady = !deleted && st.ObservedGeneration >= d.Generation && st.Replicas == a.replicas &&
			st.UpdatedReplicas == a.replicas && st.AvailableReplicas == a.replicas && st.ReadyReplicas >= a.replicas
		return !deleted
	})
}

func (t *tracker) onService(obj any, deleted, _ bool) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	t.update(s.Namespace, s.Name, func(a *app) bool { a.service = !deleted; return !deleted })
}

func (t *tracker) onConfigMap(obj any, deleted, _ bool) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	name, ok := strings.CutSuffix(cm.Name, "-config")
	if !ok {
		return
	}
	t.update(cm.Namespace, name, func(a *app) bool { a.configMap = !deleted; return !deleted })
}

func (t *tracker) onLease(obj any, deleted, _ bool) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	s := lease{observedAt: time.Now()}
	if !deleted {
		if l.Spec.HolderIdentity != nil {
			s.holder = *l.Spec.HolderIdentity
		}
		if l.Spec.AcquireTime != nil {
			s.acquire = l.Spec.AcquireTime.Time
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.leases[l.Name] = s
	kept := t.leaseWaiters[:0]
	for _, w := range t.leaseWaiters {
		if w.name == l.Name && w.pred(s) {
			w.ch <- s
			continue
		}
		kept = append(kept, w)
	}
	t.leaseWaiters = kept
}

// begin makes namespaces the current run, expecting want WebApps, and
// counts what the informers already hold there.
func (t *tracker) begin(namespaces []string, want int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &runState{namespaces: map[string]bool{}, want: want}
	for _, ns := range namespaces {
		r.namespaces[ns] = true
	}
	for key, a := range t.apps {
		ns, _, _ := strings.Cut(key, "/")
		if !r.namespaces[ns] {
			continue
		}
		if a.exists {
			r.seen++
		}
		if a.converged() {
			r.converged++
		}
		if a.ready() {
			r.ready++
		}
	}
	if r.converged == want {
		r.convergedAt = time.Now()
	}
	if r.ready == want {
		r.readyAt = time.Now()
	}
	t.run = r
}

// end stops counting for the current run (before its clean-up).
func (t *tracker) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.run = nil
}

// snapshot returns a copy of the current run and a channel closed at its
// next change.
func (t *tracker) snapshot() (runState, <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.run == nil {
		return runState{}, t.changed
	}
	return *t.run, t.changed
}

// awaitApp returns a channel that receives the time of the first event
// after which pred holds for the WebApp namespace/name. pred is evaluated
// under the tracker's lock at each event of that WebApp (and now).
func (t *tracker) awaitApp(namespace, name string, pred func(*app) bool) <-chan time.Time {
	ch := make(chan time.Time, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if a := t.apps[namespace+"/"+name]; a != nil && pred(a) {
		ch <- time.Now()
		return ch
	}
	t.appWaiters = append(t.appWaiters, &appWaiter{key: namespace + "/" + name, pred: pred, ch: ch})
	return ch
}

// awaitLease returns a channel that receives the Lease name as first seen
// with pred holding (now or at a later event).
func (t *tracker) awaitLease(name string, pred func(lease) bool) <-chan lease {
	ch := make(chan lease, 1)
	t.mu.Lock()
	defer t.mu.Unlock()
	if l, ok := t.leases[name]; ok && pred(l) {
		ch <- l
		return ch
	}
	t.leaseWaiters = append(t.leaseWaiters, &leaseWaiter{name: name, pred: pred, ch: ch})
	return ch
}
