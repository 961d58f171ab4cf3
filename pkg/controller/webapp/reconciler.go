package webapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/kubernetes"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller"
	handrollac "github.com/handroll/handroll/pkg/generated/applyconfiguration/handroll/v1"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// Event reasons.
const (
	EventCreated          = "Created"
	EventUpdated          = "Updated"
	EventDeleted          = "Deleted"
	EventResourceConflict = ReasonResourceConflict
	EventReady            = "Ready"
	EventNotReady         = "NotReady"
)

// Reconciler makes a WebApp's children match its spec and reports their
// state in its status. It reads only from listers (the informers' caches);
// it writes through the typed clientsets with server-side apply.
type Reconciler struct {
	WebApps     handrolllisters.WebAppLister
	Deployments appslisters.DeploymentLister
	Services    corelisters.ServiceLister
	ConfigMaps  corelisters.ConfigMapLister

	Client   clientset.Interface
	Kube     kubernetes.Interface
	Recorder events.EventRecorder

	// ChildrenCacheFiltered says the Deployment, Service and ConfigMap
	// caches hold only objects labelled managed-by=handroll. A child missing
	// from such a cache may still exist, unlabelled and not ours: the
	// metadata caches below say whether the name is taken and by whom, and
	// without them it is looked up in the API server.
	ChildrenCacheFiltered bool

	// The metadata of every Deployment, Service and ConfigMap not labelled
	// as ours, which the caches above hold instead (nil: not
	// cached). ConfigMapMeta also serves spec.configMapRef: the user's
	// ConfigMap's data is read from the API server only when its
	// resourceVersion moves (RefConfigMaps).
	DeploymentMeta, ServiceMeta, ConfigMapMeta MetadataGetter
	RefConfigMaps                              *RefConfigMaps

	// ChildLabels, when set, are labels every child carries besides
	// Labels, on its own metadata and never on a pod template, so that
	// adding them rolls no pod. With --shards: the owner's bucket, by which
	// a range's caches select its children (pkg/shard BucketLabel).
	ChildLabels func(*handrollv1.WebApp) map[string]string

	// StatusClient, when set, is the REST client of handroll.dev/v1 the
	// status is written through, its answer left undecoded (ApplyStatus);
	// nil: through Client.
	StatusClient rest.Interface

	// Progress, when set, paces the status writes that only report a
	// rollout's progress (nil: each is written at once).
	Progress *ProgressWrites

	// Now returns the time for condition transitions; tests fix it.
	Now func() metav1.Time

	recent   justWritten // children and statuses written, until the caches show them
	verified verified    // children found up to date, by version
}

// writtenKeys are the justWritten keys of a WebApp's status and children.
func writtenKeys(namespace, name string) (status string, children []string) {
	return "status/" + namespace + "/" + name, []string{
		childKey("Deployment", namespace, name), childKey("Service", namespace, name),
		childKey("ConfigMap", namespace, handrollv1.OwnedConfigMapName(name)),
	}
}

func childKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

var applyOptions = metav1.ApplyOptions{FieldManager: FieldManager, Force: true}

// Reconcile brings one WebApp's world in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	logger := klog.FromContext(ctx).WithValues("webapp", req.String())

	cached, err := r.WebApps.WebApps(req.Namespace).Get(req.Name)
	if apierrors.IsNotFound(err) {
		// Gone: the garbage collector removes the children, and the
		// directory controller its entry.
		status, children := writtenKeys(req.Namespace, req.Name)
		r.recent.forget(append(children, status)...)
		r.verified.forget(req)
		return controller.Result{}, nil
	}
	if err != nil {
		return controller.Result{}, err
	}
	if patch := LegacyFinalizerPatch(cached); patch != nil {
		if err := r.removeLegacyFinalizer(ctx, cached, patch); err != nil {
			return controller.Result{}, fmt.Errorf("removing the legacy finalizer %s: %w", LegacyFinalizerDirectory, err)
		}
	}
	if cached.DeletionTimestamp != nil {
		// Going: the children go with it; nothing to make.
		return controller.Result{}, nil
	}
	// The cache's object is shared with every other reader: work on a copy.
	w := cached.DeepCopy()
	handrollv1.SetObjectDefaults_WebApp(w)
	statusKey, _ := writtenKeys(w.Namespace, w.Name)
	if st, ok := r.recent.seen(statusKey, w.ResourceVersion); ok {
		w.Status = *st.(*handrollv1.WebAppStatus).DeepCopy()
	}

	obs, err := r.reconcileChildren(ctx, w)
	if err != nil {
		return controller.Result{}, err
	}
	held, err := r.updateStatus(ctx, w, obs)
	if err != nil {
		return controller.Result{}, fmt.Errorf("writing status: %w", err)
	}
	if obs.ApplyFailed != "" {
		return controller.Result{}, errors.New(obs.ApplyFailed)
	}
	if obs.Conflict != "" {
		// Retried with backoff, so the WebApp heals once the foreign object
		// goes away; never overwritten.
		logger.V(2).Info("Child name taken by an object we do not control", "object", obs.Conflict)
		return controller.Result{}, fmt.Errorf("%s exists and is not controlled by WebApp %s", obs.Conflict, req)
	}
	return controller.Result{RequeueAfter: held}, nil
}

// child is one object a WebApp owns, with how to read and apply it.
type child struct {
	kind     string
	name     string
	slot     int            // its place in verified
	filtered bool           // its cache holds only objects labelled as ours
	meta     MetadataGetter // every object's metadata, when cached
	cached   func() (metav1.Object, error)
	live     func(context.Context) (metav1.Object, error)
	// desired builds the apply configuration, once: a child found
	// verified (see verified) never needs it.
	desired func() any
	// apply writes desired with what the API server must find first
	// (precondition): the object it writes, or none.
	apply func(context.Context, precondition) (metav1.Object, error)
}

// childLabels are the labels ChildLabels adds to w's children, if any. They
// are not in the applied hash: a child without them differs from its
// desired state all the same (FirstDifference compares every field set),
// and the hash of a WebApp's children stays the same with or without them.
func (r *Reconciler) childLabels(w *handrollv1.WebApp) map[string]string {
	if r.ChildLabels == nil {
		return nil
	}
	return r.ChildLabels(w)
}

// once returns build's result, built on the first call.
func once[T any](build func() T) func() T {
	var (
		v    T
		done bool
	)
	return func() T {
		if !done {
			v, done = build(), true
		}
		return v
	}
}

// reconcileChildren ensures each of w's children and reports what it
// observed of them: a child taken by someone else or refused by the API
// server is said in obs (and an event), not returned, so that the status
// says it and the other children are still made.
func (r *Reconciler) reconcileChildren(ctx context.Context, w *handrollv1.WebApp) (Observed, error) {
	var obs Observed
	var refCM *corev1.ConfigMap // its data and binaryData go into the config hash
	if ref := w.Spec.ConfigMapRef; ref != nil {
		cm, err := r.referenced(ctx, w.Namespace, ref.Name)
		switch {
		case err == nil:
			refCM = cm
		case !apierrors.IsNotFound(err):
			return obs, err
		}
	}

	in := inputsOf(w, refCM)
	var created, updated []string // for one event that names them all
	for _, c := range r.children(w, refCM) {
		current, action, err := r.ensure(ctx, w, in, c)
		switch action {
		case EventCreated:
			created = append(created, c.kind+" "+c.name)
		case EventUpdated:
			updated = append(updated, c.kind+" "+c.name)
		}
		if err := r.observe(&obs, w, c, current, err); err != nil {
			return obs, err
		}
	}
	r.recordApplied(w, created, updated)

	if len(w.Spec.Config) == 0 {
		if err := r.deleteOwnedConfigMap(ctx, w); err != nil {
			return obs, err
		}
	}
	return obs, nil
}

// children are w's children, in the order they are applied: the ConfigMap
// of spec.config first, so that it exists when the Deployment's pods mount
// it.
func (r *Reconciler) children(w *handrollv1.WebApp, refCM *corev1.ConfigMap) []child {
	ns, name := w.Namespace, w.Name
	var children []child
	if len(w.Spec.Config) > 0 {
		cmName := handrollv1.OwnedConfigMapName(name)
		cm := once(func() *corev1ac.ConfigMapApplyConfiguration { return DesiredConfigMap(w).WithLabels(r.childLabels(w)) })
		children = append(children, child{
			kind: "ConfigMap", name: cmName, slot: slotConfigMap, filtered: r.ChildrenCacheFiltered, meta: r.ConfigMapMeta,
			cached: func() (metav1.Object, error) { return r.ConfigMaps.ConfigMaps(ns).Get(cmName) },
			live: func(ctx context.Context) (metav1.Object, error) {
				return r.Kube.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
			},
			desired: func() any { return cm() },
			apply: func(ctx context.Context, p precondition) (metav1.Object, error) {
				ac := *cm()
				ac.ObjectMetaApplyConfiguration = p.on(ac.ObjectMetaApplyConfiguration)
				return r.Kube.CoreV1().ConfigMaps(ns).Apply(ctx, &ac, applyOptions)
			},
		})
	}
	svc := once(func() *corev1ac.ServiceApplyConfiguration { return DesiredService(w).WithLabels(r.childLabels(w)) })
	children = append(children, child{
		kind: "Service", name: name, slot: slotService, filtered: r.ChildrenCacheFiltered, meta: r.ServiceMeta,
		cached: func() (metav1.Object, error) { return r.Services.Services(ns).Get(name) },
		live: func(ctx context.Context) (metav1.Object, error) {
			return r.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		},
		desired: func() any { return svc() },
		apply: func(ctx context.Context, p precondition) (metav1.Object, error) {
			ac := *svc()
			ac.ObjectMetaApplyConfiguration = p.on(ac.ObjectMetaApplyConfiguration)
			return r.Kube.CoreV1().Services(ns).Apply(ctx, &ac, applyOptions)
		},
	})
	dep := once(func() *appsv1ac.DeploymentApplyConfiguration {
		return DesiredDeployment(w, refCM).WithLabels(r.childLabels(w))
	})
	return append(children, child{
		kind: "Deployment", name: name, slot: slotDeployment, filtered: r.ChildrenCacheFiltered, meta: r.DeploymentMeta,
		cached: func() (metav1.Object, error) { return r.Deployments.Deployments(ns).Get(name) },
		live: func(ctx context.Context) (metav1.Object, error) {
			return r.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		desired: func() any { return dep() },
		apply: func(ctx context.Context, p precondition) (metav1.Object, error) {
			ac := *dep()
			ac.ObjectMetaApplyConfiguration = p.on(ac.ObjectMetaApplyConfiguration)
			return r.Kube.AppsV1().Deployments(ns).Apply(ctx, &ac, applyOptions)
		},
	})
}

// observe records in obs what ensure made of c: the object as it now is,
// or, with an event, that its name is taken by an object w does not
// control or that the API server refused it. Any other error is returned.
func (r *Reconciler) observe(obs *Observed, w *handrollv1.WebApp, c child, current metav1.Object, err error) error {
	var conflict *conflictError
	switch {
	case errors.As(err, &conflict):
		obs.Conflict = conflict.object
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, EventResourceConflict, "Reconcile",
			"%s exists and is not controlled by this WebApp; it is left untouched", conflict.object)
		return nil
	case refused(err):
		// The API server will refuse this until something changes: say
		// so in the status and an event rather than only in our log.
		obs.ApplyFailed = fmt.Sprintf("%s %s/%s: %v", c.kind, w.Namespace, c.name, err)
		r.Recorder.Eventf(w, nil, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "%s", obs.ApplyFailed)
		if _, ok := current.(*corev1.Service); ok {
			obs.ServiceExists = true // ours, unchanged: still advertised
		}
		return nil
	case err != nil:
		return fmt.Errorf("%s %s/%s: %w", c.kind, w.Namespace, c.name, err)
	}
	switch o := current.(type) {
	case *appsv1.Deployment:
		obs.Deployment = o
	case *corev1.Service:
		obs.ServiceExists = true
	}
	return nil
}

// refused tells whether err is the API server rejecting a request as such
// (invalid, forbidden), as opposed to a transient failure.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err)
}

type conflictError struct{ object string }

func (e *conflictError) Error() string { return e.object + " is not controlled by this WebApp" }

// ensure applies c unless the live object already holds its configuration,
// and never touches an object of that name that the WebApp does not
// control. It returns the object as it now is, and EventCreated or
// EventUpdated when it applied.
//
// Whether an object is ours is the API server's answer; the caches only
// say which write to try. A child they believe absent is created: its
// apply fails, and changes nothing, when the name is taken. One they
// believe ours is applied only if it is still that object (its uid). When
// the API server disagrees with the caches, the live object decides.
func (r *Reconciler) ensure(ctx context.Context, w *handrollv1.WebApp, in inputs, c child) (metav1.Object, string, error) {
	current, err := c.cached()
	if apierrors.IsNotFound(err) && c.filtered {
		current, err = r.unlabelled(ctx, c, w.Namespace)
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, "", err
	}
	cachedRV := ""
	if err == nil {
		cachedRV = current.GetResourceVersion()
	}
	key := childKey(c.kind, w.Namespace, c.name)
	if obj, ok := r.recent.seen(key, cachedRV); ok {
		current, err = obj.(metav1.Object), nil
	}
	owner := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	exists := err == nil
	var pre precondition // the name is free
	if exists {
		if !controlledBy(current, w) {
			return nil, "", conflictOf(w, c)
		}
		if _, partial := current.(*metav1.PartialObjectMetadata); !partial {
			upToDate, err := r.upToDate(ctx, owner, in, c, current)
			if upToDate || err != nil {
				return current, "", err
			}
		}
		// Ours but without our labels (so missing from the full cache):
		// the apply puts them back.
		pre.uid = current.GetUID()
	}

	applied, err := r.write(ctx, key, cachedRV, c, pre)
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		// The name is taken though the caches had not seen it, or the
		// object they knew was replaced: ask the API server whose it is.
		var ours bool
		if ours, err = r.recheck(ctx, w, c, &pre, err); ours {
			exists = true
			applied, err = r.write(ctx, key, cachedRV, c, pre)
		}
	}
	if err != nil {
		if _, partial := current.(*metav1.PartialObjectMetadata); exists && current != nil && !partial {
			// Refused or failed, the object we control is still there as
			// it was: the caller may report it (a Service still serves).
			return current, "", err
		}
		return nil, "", err
	}
	// What the API server answered is verified as any other version: a
	// mutating webhook that changes a field we set still shows as a
	// difference on the next reconcile, as it did before the memo.
	if _, err := r.upToDate(ctx, owner, in, c, applied); err != nil {
		return nil, "", err
	}
	if exists {
		return applied, EventUpdated, nil
	}
	return applied, EventCreated, nil
}

// write applies c on condition pre, remembering what it wrote until the
// cache shows it.
func (r *Reconciler) write(ctx context.Context, key, cachedRV string, c child, pre precondition) (metav1.Object, error) {
	done := r.recent.writing(key)
	defer done()
	applied, err := c.apply(ctx, pre)
	if err == nil {
		r.recent.wrote(key, cachedRV, applied)
	}
	return applied, err
}

// recheck reads c live after the API server refused a write on condition
// pre with refusal. An object that w does not control is a conflict; one
// it controls, but not the one pre named, is ours to write again, and pre
// is set to it. Otherwise the refusal stands.
func (r *Reconciler) recheck(ctx context.Context, w *handrollv1.WebApp, c child, pre *precondition, refusal error) (ours bool, err error) {
	live, err := c.live(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return false, refusal // gone meanwhile: retried with backoff
	case err != nil:
		return false, err
	case !controlledBy(live, w):
		return false, conflictOf(w, c)
	case live.GetUID() == pre.uid:
		return false, refusal // the precondition held: refused for what it says
	}
	pre.uid = live.GetUID()
	return true, nil
}

// controlledBy tells whether w is obj's controller.
func controlledBy(obj metav1.Object, w *handrollv1.WebApp) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == w.UID
}

func conflictOf(w *handrollv1.WebApp, c child) *conflictError {
	return &conflictError{object: fmt.Sprintf("%s %s/%s", c.kind, w.Namespace, c.name)}
}

// precondition is what an apply requires of the object it would change,
// checked by the API server in the same write, so that no cache's lag
// can make us write over an object that is not ours.
type precondition struct {
	// uid: the object must be this one. Empty: no object of the name
	// may exist.
	uid types.UID
}

// absentVersion is a resourceVersion no stored object has. An apply that
// carries it is refused with a Conflict by any object of its name, and
// creates one where there is none: the API server checks a create-by-apply's
// version against nothing and then wipes it (k8s.io/apiserver,
// pkg/registry/generic/registry/store.go, Store.Update). Neither it nor a
// uid is a managed field: they change no field ownership.
const absentVersion = "9223372036854775807"

// on returns m with the precondition set, leaving m as it was: the same
// apply configuration is compared with the live object (upToDate).
func (p precondition) on(m *metav1ac.ObjectMetaApplyConfiguration) *metav1ac.ObjectMetaApplyConfiguration {
	out := *m
	if p.uid == "" {
		v := absentVersion
		out.ResourceVersion = &v
	} else {
		uid := p.uid
		out.UID = &uid
	}
	return &out
}

// upToDate tells whether live, a full child object, holds c's desired
// configuration: at once when that version was verified for the same
// inputs, else by FirstDifference, whose "" is then remembered.
func (r *Reconciler) upToDate(ctx context.Context, owner types.NamespacedName, in inputs, c child, live metav1.Object) (bool, error) {
	if r.verified.upToDate(owner, in, c.slot, live) {
		return true, nil
	}
	diff, err := FirstDifference(c.desired(), live)
	if err != nil {
		return false, err
	}
	if diff != "" {
		klog.FromContext(ctx).V(3).Info("Child differs from the desired state; applying", "kind", c.kind, "name", c.name, "field", diff)
		return false, nil
	}
	r.verified.record(owner, in, c.slot, live)
	return true, nil
}

// unlabelled finds a child that the filtered cache does not hold: the
// metadata cache says whether the name is taken, and by whose controller.
// Without a metadata cache the API server is asked.
func (r *Reconciler) unlabelled(ctx context.Context, c child, namespace string) (metav1.Object, error) {
	if c.meta == nil {
		return c.live(ctx)
	}
	return c.meta.Get(namespace, c.name)
}

// recordApplied sends one event for what a reconcile applied, naming every
// child: a new WebApp gets one event, not one per child.
func (r *Reconciler) recordApplied(w *handrollv1.WebApp, created, updated []string) {
	switch {
	case len(created) > 0 && len(updated) > 0:
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, EventCreated, "Apply", "Created %s; updated %s",
			strings.Join(created, ", "), strings.Join(updated, ", "))
	case len(created) > 0:
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, EventCreated, "Apply", "Created %s", strings.Join(created, ", "))
	case len(updated) > 0:
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, EventUpdated, "Apply", "Updated %s", strings.Join(updated, ", "))
	}
}

// deleteOwnedConfigMap removes the ConfigMap rendered from spec.config once
// spec.config is emptied; one we do not control is left alone.
func (r *Reconciler) deleteOwnedConfigMap(ctx context.Context, w *handrollv1.WebApp) error {
	name := handrollv1.OwnedConfigMapName(w.Name)
	cm, err := r.ConfigMaps.ConfigMaps(w.Namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != w.UID {
		return nil
	}
	r.recent.forget(childKey("ConfigMap", w.Namespace, name))
	err = r.Kube.CoreV1().ConfigMaps(w.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &cm.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		r.Recorder.Eventf(w, nil, corev1.EventTypeNormal, EventDeleted, "Delete", "Deleted ConfigMap %s: spec.config is empty", name)
	}
	return err
}

// updateStatus computes the status and writes it through the status
// subresource, only when it differs from what the WebApp already shows.
// A write that only reports progress may be held (Progress), and so may a
// new WebApp's first status while its rollout goes (Progress.HoldFirst):
// it returns how long, for the caller to requeue the WebApp.
func (r *Reconciler) updateStatus(ctx context.Context, w *handrollv1.WebApp, obs Observed) (time.Duration, error) {
	now := metav1.Now()
	if r.Now != nil {
		now = r.Now()
	}
	status := ComputeStatus(w, obs, now)
	if equality.Semantic.DeepEqual(status, w.Status) {
		return 0, nil
	}
	owner := types.NamespacedName{Namespace: w.Namespace, Name: w.Name}
	wall := time.Now()
	if held := max(r.Progress.HoldFirst(w.CreationTimestamp.Time, w.Status, status, wall),
		r.Progress.Hold(owner, w.Status, status, wall)); held > 0 {
		return held, nil
	}
	ac := handrollac.WebApp(w.Name, w.Namespace).WithStatus(statusApplyConfiguration(status))
	if err := r.applyStatus(ctx, ac); err != nil {
		return 0, err
	}
	r.Progress.Wrote(owner, time.Now())
	key, _ := writtenKeys(w.Namespace, w.Name)
	r.recent.wrote(key, w.ResourceVersion, status.DeepCopy())
	// The echo may have reached the cache before the answer reached us, and
	// found nothing to drop (observeStatus): the cache then holds it.
	if cached, err := r.WebApps.WebApps(w.Namespace).Get(w.Name); err != nil {
		r.recent.forget(key)
	} else {
		r.recent.movedFrom(key, cached.ResourceVersion)
	}

	if typ, reason, note, ok := ReadinessEvent(w.Status.Conditions, status.Conditions); ok {
		r.Recorder.Eventf(w, nil, typ, reason, "Reconcile", "%s", note)
	}
	return 0, nil
}

// ReadinessEvent is the event, if any, for the Ready condition going from
// was to now. A WebApp that stops being Ready for a reason a person may
// have to act on (its pods lost, a rollout past its deadline, a child
// taken or refused) gets a NotReady Warning, and a Ready event once it
// recovers. Not being Ready yet because pods are rolling out (a new
// WebApp, an update, a scale) or a child is being created is not one: the
// Progressing condition reports it, and a Warning for every update would
// page someone for a routine change. So a new WebApp gets one event,
// Created.
func ReadinessEvent(was, now []metav1.Condition) (typ, reason, note string, ok bool) {
	before := meta.FindStatusCondition(was, handrollv1.ConditionReady)
	after := meta.FindStatusCondition(now, handrollv1.ConditionReady)
	switch {
	case before == nil || after == nil:
		// The first status: a child refused or taken has its own Warning.
		return "", "", "", false
	case after.Status == metav1.ConditionTrue && warned(before):
		return corev1.EventTypeNormal, EventReady, after.Message, true
	case warned(after) && !warned(before):
		return corev1.EventTypeWarning, EventNotReady, after.Reason + ": " + after.Message, true
	}
	return "", "", "", false
}

// warned tells whether Ready says False for a reason worth a Warning: not
// a rollout under way, nor a child about to be created.
func warned(ready *metav1.Condition) bool {
	return ready.Status == metav1.ConditionFalse && ready.Reason != ReasonRollingOut && ready.Reason != ReasonPending
}

func statusApplyConfiguration(st handrollv1.WebAppStatus) *handrollac.WebAppStatusApplyConfiguration {
	data, err := json.Marshal(st)
	if err != nil {
		panic(fmt.Sprintf("marshalling a WebAppStatus cannot fail: %v", err))
	}
	var ac handrollac.WebAppStatusApplyConfiguration
	if err := json.Unmarshal(data, &ac); err != nil {
		panic(fmt.Sprintf("a WebAppStatus always fits its apply configuration: %v", err))
	}
	return &ac
}

// LegacyFinalizerPatch is the JSON patch that removes
// LegacyFinalizerDirectory from w, or nil when w does not carry it. Its
// "test" operations make sure it removes that entry of that object and no
// other: when the list has changed since w was read, the API server refuses
// it and the caller retries from the newer version. Server-side apply cannot
// do this: a finalizer that another field manager also owns (a restore,
// kubectl create of exported YAML) stays when we stop applying it.
func LegacyFinalizerPatch(w *handrollv1.WebApp) []byte {
	i := slices.Index(w.Finalizers, LegacyFinalizerDirectory)
	if i < 0 {
		return nil
	}
	path := fmt.Sprintf("/metadata/finalizers/%d", i)
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": w.UID},
		{"op": "test", "path": path, "value": LegacyFinalizerDirectory},
		{"op": "remove", "path": path},
	})
	if err != nil {
		panic(fmt.Sprintf("marshalling a JSON patch of strings cannot fail: %v", err))
	}
	return patch
}

// removeLegacyFinalizer sends LegacyFinalizerPatch.
func (r *Reconciler) removeLegacyFinalizer(ctx context.Context, w *handrollv1.WebApp, patch []byte) error {
	_, err := r.Client.HandrollV1().WebApps(w.Namespace).Patch(ctx, w.Name, types.JSONPatchType, patch,
		metav1.PatchOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		return nil // gone already
	}
	return err
}
