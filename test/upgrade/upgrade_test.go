package upgrade

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/release"
)

var (
	webapps     = schema.GroupVersionResource{Group: "handroll.dev", Version: "v1", Resource: "webapps"}
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	replicasets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	services    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	configmaps  = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	pods        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

const (
	// overlap is how long both processes serve the webhooks, the new one a
	// standby, before the old one stops.
	overlap = 3 * time.Second
	// settle is how long nothing of the measured WebApps may change once
	// the new process has reconciled every WebApp.
	settle = 5 * time.Second
)

// TestUpgradeRollsNoPods upgrades from each release (the latest before this
// tree, and the oldest supported) to this tree as
// a user does, CRD first, then the operator, one process replacing the
// other as a rolling Deployment's pods do, and shows that nobody's pods
// roll: no Deployment's generation or pod template changes, no child is
// written, and the WebApps' statuses are kept; the new process writes each
// status at most once (to add conditions the old one did not know). A
// writer keeps writing WebApps through the webhooks all along, and none of
// its writes may be refused.
func TestUpgradeRollsNoPods(t *testing.T) {
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	for i, from := range releases {
		t.Run(from.Ref, func(t *testing.T) { upgradeRollsNoPods(t, from, 30080+int32(i)) })
	}
}

// upgradeRollsNoPods upgrades from the release from; fixedNodePort is the
// node port its measured WebApps ask for, one no earlier upgrade holds.
func upgradeRollsNoPods(t *testing.T, from *release.Release, fixedNodePort int32) {
	began := time.Now()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	oldBin, newBin := buildReleases(t, from)
	built := time.Since(began)
	// The builds are not the upgrade's work: its budget starts after them.
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Minute, "the upgrade from "+from.Ref)
	defer cancel()
	// Whether this release may change existing WebApps' children.
	why, err := rollsPods(root)
	if err != nil {
		t.Fatal(err)
	}

	kube, hc := env.KubeClient(t), env.HandrollClient(t)
	dyn := dynamic.NewForConfigOrDie(env.Config)
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	opNS, ns, writtenNS := namespace(ctx, t, "handroll-system"), namespace(ctx, t, "measured"), namespace(ctx, t, "written")

	certDir, caBundle, svc, url := newWebhookEndpoint(t)
	start := func(bin string) *replica { return startReplica(t, bin, opNS, certDir, svc) }

	// The cluster as the release leaves it.
	readManifests(t, from.Dir).applyCRDs(ctx, t, ext, url, caBundle)
	readManifests(t, from.Dir).applyWebhooks(ctx, t, kube, url, caBundle)
	old := start(oldBin)
	names := createMeasured(ctx, t, kube, hc, ns, fixedNodePort)
	written := release.CreateWritten(ctx, t, hc, writtenNS, image, 3)
	waitConverged(ctx, t, hc, kube, ns, names)
	waitConverged(ctx, t, hc, kube, writtenNS, written)
	waitQuiet(ctx, t, dyn, ns)

	// From here every write to the measured objects is counted.
	m := recordMeasured(ctx, t, dyn, ns, opNS)

	wctx, stopWriter := context.WithCancel(ctx)
	defer stopWriter()
	w := &release.Writer{Client: hc, NS: writtenNS, Names: written}
	writing := make(chan struct{})
	go func() { defer close(writing); w.Run(wctx, 40*time.Millisecond) }()
	checkWriterWithRelease(t, w)

	// The upgrade: the CRD and the webhook configurations first, then the
	// new process, a standby of the same Lease, which joins the Service once
	// ready; the old one leaves the Service and is stopped.
	upgradeBegan := time.Now()
	writesBefore, _, _ := w.Figures()
	current := readManifests(t, root)
	current.applyCRDs(ctx, t, ext, url, caBundle)
	current.applyWebhooks(ctx, t, kube, url, caBundle)
	next := start(newBin)
	r := replaceProcess(ctx, t, old, next, svc, reconcileKeys(ns, names, writtenNS, written))
	writesDuring, _, _ := w.Figures()
	writesDuring -= writesBefore
	// A release that says why it rolls pods settles once the roll is over.
	settled := settleRoll(ctx, t, hc, kube, dyn, ns, names, why, r.reconciled)
	time.Sleep(settle)
	stopWriter()
	<-writing
	waitConverged(ctx, t, hc, kube, writtenNS, written)

	if both := sideBySide(t, old, next); len(both) > 0 {
		t.Errorf("the two processes reconciled side by side:\n%s", strings.Join(both, "\n"))
	}
	checkStoredVersions(ctx, t, ext)

	// Refused writes: the webhooks must have been served throughout.
	writes, conflicts, refused := w.Figures()
	excused := checkRefused(t, from, refused, writes, r.stopped, r.exited)
	k := checkKept(ctx, t, dyn, ns, why, m, settled)

	conns, connRefused := svc.counts()
	logUpgrade(t, upgradeReport{from: from, ns: ns, writtenNS: writtenNS, names: names, written: written,
		podsBefore: len(m.podsBefore), podsKept: overlapping(m.podsBefore, uids(ctx, t, dyn, pods, ns)),
		writesDuring: writesDuring, writes: writes, conflicts: conflicts, refused: len(refused), excused: excused,
		oldConns: conns[old.addr], newConns: conns[next.addr], connRefused: connRefused,
		kept: k, replacement: r, built: built, replaced: r.reconciled.Sub(upgradeBegan), whole: time.Since(began)})
}

// recorders are the recorders of every write to the measured namespace's
// WebApps and children (webapps, deployments, services, configmaps,
// replicasets, in that order) and to the directory, with the measured
// pods' UIDs before the upgrade.
type recorders struct {
	recs       []*recorder
	directory  *recorder
	podsBefore map[string]string
}

// recordMeasured starts counting every write to the measured objects in
// ns and to the directory in opNS.
func recordMeasured(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, opNS string) recorders {
	t.Helper()
	recs := []*recorder{
		record(ctx, t, dyn, webapps, ns), record(ctx, t, dyn, deployments, ns),
		record(ctx, t, dyn, services, ns), record(ctx, t, dyn, configmaps, ns),
		record(ctx, t, dyn, replicasets, ns),
	}
	directory := record(ctx, t, dyn, configmaps, opNS)
	podsBefore := uids(ctx, t, dyn, pods, ns)
	return recorders{recs: recs, directory: directory, podsBefore: podsBefore}
}

// checkWriterWithRelease gives the writer 2 s with the release alone, and
// fails t unless it wrote and none of its writes was refused.
func checkWriterWithRelease(t *testing.T, w *release.Writer) {
	t.Helper()
	time.Sleep(2 * time.Second)
	if n, _, refused := w.Figures(); n == 0 || len(refused) > 0 {
		t.Fatalf("with the release alone, the writer's writes: %d accepted, refused: %v", n, refused)
	}
}

// reconcileKeys are the namespace/name keys of the measured and the
// written WebApps.
func reconcileKeys(ns string, names []string, writtenNS string, written []string) []string {
	var keys []string
	for _, n := range names {
		keys = append(keys, ns+"/"+n)
	}
	for _, n := range written {
		keys = append(keys, writtenNS+"/"+n)
	}
	return keys
}

// replacement is how the old process handed over to the new one.
type replacement struct {
	stopped, exited time.Time // the old one's SIGTERM, and its exit
	firstReconcile  time.Time // when the new one's first reconcile began
	reconciled      time.Time // when the new one had reconciled every WebApp
}

// replaceProcess lets old and next, its standby, serve the webhooks side
// by side for overlap; then old leaves the Service and is stopped, and
// next must reconcile every one of keys.
func replaceProcess(ctx context.Context, t *testing.T, old, next *replica, svc *service, keys []string) replacement {
	t.Helper()
	time.Sleep(overlap)
	svc.remove(old.addr)
	stopped := time.Now()
	if err := old.op.Stop(t, syscall.SIGTERM, 45*time.Second); err != nil {
		t.Errorf("the release did not stop cleanly on SIGTERM: %v", err)
	}
	exited, _ := old.op.ExitedAt()
	firstReconcile := next.waitReconciled(ctx, t, keys)
	return replacement{stopped: stopped, exited: exited, firstReconcile: firstReconcile, reconciled: time.Now()}
}

// settleRoll returns when the measured WebApps names in ns settled after
// the new process had reconciled every WebApp (at reconciled): then, unless
// the release says why it rolls pods; if it does, once the roll is over.
func settleRoll(ctx context.Context, t *testing.T, hc versioned.Interface, kube kubernetes.Interface, dyn dynamic.Interface, ns string, names []string, why string, reconciled time.Time) time.Time {
	t.Helper()
	settled := reconciled
	if why != "" {
		waitConverged(ctx, t, hc, kube, ns, names)
		waitQuiet(ctx, t, dyn, ns)
		settled = time.Now()
	}
	return settled
}

// checkStoredVersions fails t unless the CRD stores v1 alone after the
// upgrade.
func checkStoredVersions(ctx context.Context, t *testing.T, ext apiextensionsclient.Interface) {
	t.Helper()
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "webapps.handroll.dev", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := crd.Status.StoredVersions; !equality.Semantic.DeepEqual(got, []string{"v1"}) {
		t.Errorf("status.storedVersions %v after the upgrade, want [v1] (docs/upgrade.md)", got)
	}
}

// kept is what checkKept counted, for the log.
type kept struct {
	childWrites, statusOnly []write
	webappStatusWrites      map[string]int
	rolled                  int
	added                   []string
}

// checkKept checks that the upgrade kept the measured objects in ns: no
// writes to their content, none after settled, no Deployment rolled, no
// pod replaced, the WebApps' statuses kept. What a roll of pods changes
// goes to childChange, which why may excuse.
func checkKept(ctx context.Context, t *testing.T, dyn dynamic.Interface, ns, why string, m recorders, settled time.Time) kept {
	t.Helper()
	changed := childChange(t, why)
	childWrites, statusOnly, webappStatusWrites := checkWrites(t, append(m.recs, m.directory), settled, changed)
	rolled := checkDeployments(m.recs[1], changed)
	if after := uids(ctx, t, dyn, pods, ns); !equality.Semantic.DeepEqual(m.podsBefore, after) {
		changed("pods replaced: before %v, after %v", m.podsBefore, after)
	}
	added := checkStatuses(t, m.recs[0], webappStatusWrites, changed)
	return kept{childWrites: childWrites, statusOnly: statusOnly, webappStatusWrites: webappStatusWrites, rolled: rolled, added: added}
}

// upgradeReport is what the log of an upgrade from a release reports.
type upgradeReport struct {
	from                                              *release.Release
	ns, writtenNS                                     string
	names, written                                    []string
	podsBefore, podsKept                              int
	writesDuring, writes, conflicts, refused, excused int
	oldConns, newConns, connRefused                   int
	kept                                              kept
	replacement                                       replacement
	built, replaced, whole                            time.Duration
}

// logUpgrade logs an upgrade's figures.
func logUpgrade(t *testing.T, u upgradeReport) {
	t.Helper()
	k, r := u.kept, u.replacement
	t.Logf(`upgrade from %s (%s) to this tree:
  WebApps measured: %d (%d pods), in %s; written by the writer: %d, in %s
  writer: %d writes accepted during the replacement (CRD applied until the new process had reconciled every WebApp), %d in all, %d conflicts (read again for the next write), %d refused (%d of them excused by test/upgrade/supported)
  webhook Service connections: previous %d, current %d, refused %d
  WebApps, children and directory written (metadata, spec, data): %d; Deployments whose generation or pod template changed: %d; pods replaced: %d of %d
  status-only changes of children (by the cluster's controllers): %d
  WebApp status writes by the new process: %d of %d WebApps, conditions added: %v
  hand-over: the old process exited %s after SIGTERM; the new one reconciled first %s after that, every WebApp %s after it
  time: builds %s, replacement %s, whole test %s`,
		u.from.Ref, u.from.Commit[:12],
		len(u.names), u.podsBefore, u.ns, len(u.written), u.writtenNS,
		u.writesDuring, u.writes, u.conflicts, u.refused, u.excused,
		u.oldConns, u.newConns, u.connRefused,
		len(k.childWrites), k.rolled, u.podsBefore-u.podsKept, u.podsBefore,
		len(k.statusOnly),
		len(k.webappStatusWrites), len(u.names), k.added,
		r.exited.Sub(r.stopped).Round(time.Millisecond), r.firstReconcile.Sub(r.exited).Round(time.Millisecond), r.reconciled.Sub(r.exited).Round(time.Millisecond),
		u.built.Round(time.Second), u.replaced.Round(time.Millisecond), u.whole.Round(time.Second))
}

// checkWrites fails t for every object created or deleted, every write to
// an object's metadata, spec or data (a WebApp's included), and any write
// at all to the measured namespace after settledAt; those to the WebApps'
// children go to changed instead. recs ends with the directory's. It
// returns the writes to content and those to the status of children, and
// the status writes per WebApp.
func checkWrites(t *testing.T, recs []*recorder, settledAt time.Time, changed func(string, ...any)) (content, childStatus []write, webappStatus map[string]int) {
	t.Helper()
	webappStatus = map[string]int{}
	var own []write // to the WebApps and the directory
	for _, r := range recs {
		child := r.resource != "webapps" && r != recs[len(recs)-1]
		all, created, deleted, err := r.result()
		if err != nil {
			t.Fatal(err)
		}
		if len(created)+len(deleted) > 0 {
			report := t.Errorf
			if child {
				report = changed
			}
			report("%s created %v, deleted %v during the upgrade", r.resource, created, deleted)
		}
		for _, w := range all {
			switch {
			case w.content && child:
				content = append(content, w)
				changed("%s %s written during the upgrade:\n%s", r.resource, w.key, w)
			case w.content:
				content = append(content, w)
				own = append(own, w)
			case r.resource == "webapps":
				webappStatus[w.key]++
			default:
				childStatus = append(childStatus, w)
			}
		}
		// The directory is the last: it may change with the other
		// namespace's WebApps, as long as its content does not.
		if late := r.since(settledAt); len(late) > 0 && r != recs[len(recs)-1] {
			t.Errorf("%s still changed after the new process had reconciled every WebApp:\n%s", r.resource, joinWrites(late))
		}
	}
	if len(own) > 0 {
		t.Errorf("%d writes to the metadata, spec or data of WebApps or the directory during the upgrade:\n%s",
			len(own), joinWrites(own))
	}
	return content, childStatus, webappStatus
}

// checkRefused fails t for every refused write, but for those the
// supported file excuses for the release from: a webhook call that found
// its connection closed while that release stopped (from its SIGTERM until
// just after it exited), which only the release's own code could have
// avoided. It returns how many it excused.
func checkRefused(t *testing.T, from *release.Release, refused []release.Refusal, writes int, stopped, exited time.Time) int {
	t.Helper()
	var failed []string
	excused := 0
	for _, r := range refused {
		if from.Allows(release.AllowClosedOnStop) && r.ClosedConnection() &&
			!r.At.Before(stopped) && r.At.Before(exited.Add(500*time.Millisecond)) {
			excused++
			t.Logf("refused while %s stopped, excused by test/upgrade/supported (%s): %s", from.Ref, release.AllowClosedOnStop, r)
			continue
		}
		failed = append(failed, r.String())
	}
	if len(failed) > 0 {
		t.Errorf("%d of the writer's %d writes were refused:\n%s", len(failed), writes+len(refused), strings.Join(failed, "\n"))
	}
	return excused
}

func namespace(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	ns, err := env.CreateNamespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// checkDeployments reports to changed every Deployment whose generation or
// pod template differs from what it was before the upgrade, and returns
// how many.
func checkDeployments(r *recorder, changed func(string, ...any)) int {
	n := 0
	for _, name := range r.names() {
		before, after := r.first[name], r.current(name)
		tb, _, _ := unstructured.NestedMap(before.Object, "spec", "template")
		ta, _, _ := unstructured.NestedMap(after.Object, "spec", "template")
		if before.GetGeneration() != after.GetGeneration() || !equality.Semantic.DeepEqual(tb, ta) {
			n++
			changed("Deployment %s: generation %d → %d, pod template (-before +after):\n%s",
				name, before.GetGeneration(), after.GetGeneration(), cmp.Diff(tb, ta))
		}
	}
	return n
}

// checkStatuses reports every WebApp whose status the upgrade did not keep,
// or that the new process wrote more than once; it returns the condition
// types the new process added. Status writes and conditions that a roll
// of the WebApp's pods changes go to changed; the rest fails t.
func checkStatuses(t *testing.T, r *recorder, statusWrites map[string]int, changed func(string, ...any)) []string {
	t.Helper()
	added := map[string]bool{}
	for _, name := range r.names() {
		if n := statusWrites[name]; n > 1 {
			changed("WebApp %s: its status was written %d times; an upgrade may write it once", name, n)
		}
		before, after := r.first[name], r.current(name)
		if before.GetGeneration() != after.GetGeneration() {
			t.Errorf("WebApp %s: generation %d → %d", name, before.GetGeneration(), after.GetGeneration())
		}
		for _, field := range []string{"observedGeneration", "replicas", "readyReplicas", "selector", "url"} {
			b, _, _ := unstructured.NestedFieldNoCopy(before.Object, "status", field)
			a, _, _ := unstructured.NestedFieldNoCopy(after.Object, "status", field)
			if !equality.Semantic.DeepEqual(a, b) {
				t.Errorf("WebApp %s: status.%s %v → %v", name, field, b, a)
			}
		}
		cb, ca := conditions(t, before), conditions(t, after)
		for typ, b := range cb {
			a, ok := ca[typ]
			if !ok {
				t.Errorf("WebApp %s: condition %s dropped", name, typ)
				continue
			}
			if a.Status != b.Status || a.Reason != b.Reason || a.ObservedGeneration != b.ObservedGeneration || !a.LastTransitionTime.Equal(&b.LastTransitionTime) {
				changed("WebApp %s: condition %s not kept: %s/%s (generation %d, since %s) → %s/%s (generation %d, since %s)", name, typ,
					b.Status, b.Reason, b.ObservedGeneration, b.LastTransitionTime, a.Status, a.Reason, a.ObservedGeneration, a.LastTransitionTime)
			}
		}
		for typ, a := range ca {
			if _, ok := cb[typ]; !ok {
				added[fmt.Sprintf("%s=%s", typ, a.Status)] = true
			}
		}
	}
	var out []string
	for k := range added {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func conditions(t *testing.T, o *unstructured.Unstructured) map[string]metav1.Condition {
	t.Helper()
	raw, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var list struct {
		Conditions []metav1.Condition `json:"conditions"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"conditions": raw}, &list); err != nil {
		t.Fatalf("WebApp %s: status.conditions: %v", o.GetName(), err)
	}
	out := map[string]metav1.Condition{}
	for _, c := range list.Conditions {
		out[c.Type] = c
	}
	if meta.FindStatusCondition(list.Conditions, "Ready") == nil {
		t.Errorf("WebApp %s has no Ready condition", o.GetName())
	}
	return out
}

// uids maps each object's name to its UID.
func uids(ctx context.Context, t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string) map[string]string {
	t.Helper()
	list, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range list.Items {
		out[o.GetName()] = string(o.GetUID())
	}
	return out
}

// overlapping counts the objects of a that b holds with the same UID.
func overlapping(a, b map[string]string) int {
	n := 0
	for k, v := range a {
		if b[k] == v {
			n++
		}
	}
	return n
}
