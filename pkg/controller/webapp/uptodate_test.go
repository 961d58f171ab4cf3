package webapp

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/controller"
	handrollfake "github.com/handroll/handroll/pkg/generated/clientset/versioned/fake"
	handrolllisters "github.com/handroll/handroll/pkg/generated/listers/handroll/v1"
)

// storedDeployment is desired as an informer hands it out after the apply:
// typed, without apiVersion and kind, with the API server's defaults,
// metadata and status.
func storedDeployment(tb testing.TB, desired any) *appsv1.Deployment {
	d := roundTrip[appsv1.Deployment](tb, desired)
	d.TypeMeta = metav1.TypeMeta{}
	d.UID, d.ResourceVersion, d.Generation = "uid-deployment", "1001", 1
	d.CreationTimestamp = metav1.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	d.Annotations["deployment.kubernetes.io/revision"] = "1"
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}}
	d.Spec.RevisionHistoryLimit = ptr.To[int32](10)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](600)
	pod := &d.Spec.Template.Spec
	pod.RestartPolicy = corev1.RestartPolicyAlways
	pod.DNSPolicy = corev1.DNSClusterFirst
	pod.SchedulerName = corev1.DefaultSchedulerName
	pod.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.SecurityContext = &corev1.PodSecurityContext{}
	for i := range pod.Volumes {
		if cm := pod.Volumes[i].ConfigMap; cm != nil {
			cm.DefaultMode = ptr.To[int32](0o644)
		}
	}
	for i := range pod.Containers {
		c := &pod.Containers[i]
		c.ImagePullPolicy = corev1.PullIfNotPresent
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		for j := range c.Env {
			if f := c.Env[j].ValueFrom; f != nil && f.FieldRef != nil {
				f.FieldRef.APIVersion = "v1"
			}
		}
	}
	now := metav1.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC)
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: 1, Replicas: *d.Spec.Replicas, UpdatedReplicas: *d.Spec.Replicas,
		ReadyReplicas: *d.Spec.Replicas, AvailableReplicas: *d.Spec.Replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: now, LastTransitionTime: now, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "shop-5d4f8c7b9" has successfully progressed.`},
		},
	}
	return d
}

// storedService is desired as an informer hands it out after the apply.
func storedService(tb testing.TB, desired any) *corev1.Service {
	s := roundTrip[corev1.Service](tb, desired)
	s.TypeMeta = metav1.TypeMeta{}
	s.UID, s.ResourceVersion = "uid-service", "1002"
	s.CreationTimestamp = metav1.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Spec.ClusterIP = "10.96.12.34"
	s.Spec.ClusterIPs = []string{"10.96.12.34"}
	s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
	s.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
	s.Spec.SessionAffinity = corev1.ServiceAffinityNone
	s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	return s
}

// storedConfigMap is desired as an informer hands it out after the apply.
func storedConfigMap(tb testing.TB, desired any) *corev1.ConfigMap {
	cm := roundTrip[corev1.ConfigMap](tb, desired)
	cm.TypeMeta = metav1.TypeMeta{}
	cm.UID, cm.ResourceVersion = "uid-configmap", "1003"
	cm.CreationTimestamp = metav1.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	return cm
}

// upToDate is a reconciler whose caches hold a WebApp (testWebApp, with a
// referenced ConfigMap) and its children as the last apply left them, and
// whose WebApp already shows the status a reconcile computes.
type upToDate struct {
	r    *Reconciler
	kube *fake.Clientset
	hr   *handrollfake.Clientset
	req  controller.Request

	webapps, deployments, services, configMaps cache.Indexer
}

func newUpToDate(tb testing.TB) *upToDate {
	w := testWebApp()
	w.ResourceVersion = "1000"
	w.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	ref := refConfigMap(map[string]string{"settings.yaml": "level: info"}, nil)
	ref.ResourceVersion = "900"

	dep := storedDeployment(tb, DesiredDeployment(w, ref))
	now := metav1.Date(2025, 1, 2, 3, 6, 0, 0, time.UTC)
	w.Status = ComputeStatus(w, Observed{Deployment: dep, ServiceExists: true}, now)

	newIndexer := func() cache.Indexer {
		return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}
	webapps, deployments, services, configMaps := newIndexer(), newIndexer(), newIndexer(), newIndexer()
	if err := webapps.Add(w); err != nil {
		tb.Fatal(err)
	}
	for _, add := range []struct {
		indexer cache.Indexer
		obj     any
	}{
		{deployments, dep},
		{services, storedService(tb, DesiredService(w))},
		{configMaps, storedConfigMap(tb, DesiredConfigMap(w))},
		{configMaps, ref},
	} {
		cacheChild(tb, add.indexer, add.obj)
	}
	kube, hr := fake.NewClientset(), handrollfake.NewSimpleClientset()
	return &upToDate{
		r: &Reconciler{
			WebApps:     handrolllisters.NewWebAppLister(webapps),
			Deployments: handrollcache.NewDeploymentLister(deployments),
			Services:    handrollcache.NewServiceLister(services),
			ConfigMaps:  handrollcache.NewConfigMapLister(configMaps),
			Client:      hr,
			Kube:        kube,
			Recorder:    events.NewFakeRecorder(100),
			Now:         func() metav1.Time { return now },
		},
		kube: kube, hr: hr,
		req:     controller.Request{Namespace: w.Namespace, Name: w.Name},
		webapps: webapps, deployments: deployments, services: services, configMaps: configMaps,
	}
}

// cacheChild stores obj in indexer as a children's cache does: through its
// transform, so that reads decode what the operator's would.
func cacheChild(tb testing.TB, indexer cache.Indexer, obj any) {
	tb.Helper()
	stored, err := handrollcache.CompactChild(obj)
	if err == nil {
		err = indexer.Add(stored)
	}
	if err != nil {
		tb.Fatal(err)
	}
}

// reconcile runs one Reconcile and fails if it sent any request.
func (u *upToDate) reconcile(tb testing.TB) {
	if _, err := u.r.Reconcile(context.Background(), u.req); err != nil {
		tb.Fatalf("Reconcile: %v", err)
	}
	if a := append(u.kube.Actions(), u.hr.Actions()...); len(a) > 0 {
		tb.Fatalf("an up-to-date WebApp sent %d requests, the first %s %s", len(a), a[0].GetVerb(), a[0].GetResource().Resource)
	}
}

func TestReconcileUpToDateWritesNothing(t *testing.T) {
	newUpToDate(t).reconcile(t)
}

// BenchmarkReconcileUpToDate is the reconcile of a WebApp whose children
// and status are up to date, and were found so before at the same
// versions: the steady state of every resync and of a child's status
// event.
func BenchmarkReconcileUpToDate(b *testing.B) {
	u := newUpToDate(b)
	u.reconcile(b)
	b.ReportAllocs()
	for b.Loop() {
		u.reconcile(b)
	}
}

// BenchmarkReconcileUpToDateFirst is the same reconcile with nothing
// verified yet, so every child is built and compared field by field: the
// first reconcile of each WebApp after a start.
func BenchmarkReconcileUpToDateFirst(b *testing.B) {
	u := newUpToDate(b)
	u.reconcile(b)
	b.ReportAllocs()
	for b.Loop() {
		u.r.verified.forget(u.req)
		u.reconcile(b)
	}
}

// upToDateDeployment is a typical Deployment and its desired state, up to
// date.
func upToDateDeployment(tb testing.TB) (desired any, live *appsv1.Deployment) {
	w := testWebApp()
	w.Spec.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	ref := refConfigMap(map[string]string{"settings.yaml": "level: info"}, nil)
	d := DesiredDeployment(w, ref)
	return d, storedDeployment(tb, d)
}

// TestFirstDifferenceReadsInPlace: FirstDifference on an up-to-date
// Deployment decodes neither object: decoding either whole into JSON
// values costs hundreds of allocations (the comparison it replaced made
// over 1,300); what is left is the quantities', encoded one by one, and
// the walk's own (map keys, the names of keyed lists).
func TestFirstDifferenceReadsInPlace(t *testing.T) {
	desired, live := upToDateDeployment(t)
	if d, err := FirstDifference(desired, live); d != "" || err != nil {
		t.Fatalf("FirstDifference = %q, %v", d, err)
	}
	allocs := testing.AllocsPerRun(100, func() { _, _ = FirstDifference(desired, live) })
	if allocs > 100 {
		t.Errorf("FirstDifference on an up-to-date Deployment: %.0f allocations, want at most 100", allocs)
	}
	old := testing.AllocsPerRun(10, func() { _, _ = differenceJSON(desired, live) })
	t.Logf("%.0f allocations; %.0f through JSON", allocs, old)
}

func BenchmarkFirstDifferenceDeployment(b *testing.B) {
	desired, live := upToDateDeployment(b)
	b.ReportAllocs()
	for b.Loop() {
		if d, err := FirstDifference(desired, live); d != "" || err != nil {
			b.Fatalf("FirstDifference = %q, %v", d, err)
		}
	}
}

// TestChildLabelsReachEveryChildButNoPod: with ChildLabels (sharded
// replicas' bucket), up-to-date children that lack the label are applied
// once, with it on their own metadata and not on the pod template, so no
// pod rolls; once they carry it, a reconcile writes nothing.
func TestChildLabelsReachEveryChildButNoPod(t *testing.T) {
	u := newUpToDate(t)
	const key, value = "example.com/bucket", "3f"
	u.r.ChildLabels = func(*handrollv1.WebApp) map[string]string { return map[string]string{key: value} }
	for _, w := range u.webapps.List() { // the status, from the applied children, may be written
		if err := u.hr.Tracker().Add(w.(*handrollv1.WebApp)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := u.r.Reconcile(context.Background(), u.req); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	applied := map[string]bool{}
	for _, a := range u.kube.Actions() {
		p, ok := a.(clienttesting.PatchAction)
		if !ok || p.GetPatchType() != types.ApplyPatchType {
			t.Errorf("unexpected %s %s", a.GetVerb(), a.GetResource().Resource)
			continue
		}
		var obj struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Template *struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(p.GetPatch(), &obj); err != nil {
			t.Fatal(err)
		}
		res := p.GetResource().Resource
		applied[res] = true
		if obj.Metadata.Labels[key] != value {
			t.Errorf("%s applied with labels %v, want %s=%s among them", res, obj.Metadata.Labels, key, value)
		}
		if tpl := obj.Spec.Template; tpl != nil {
			if _, on := tpl.Metadata.Labels[key]; on {
				t.Errorf("%s's pod template got the label: its pods would roll", res)
			}
		}
	}
	if want := map[string]bool{"deployments": true, "services": true, "configmaps": true}; !maps.Equal(applied, want) {
		t.Errorf("applied %v, want every child once", applied)
	}

	// Stored with the label, the children are up to date again.
	u = newUpToDate(t)
	u.r.ChildLabels = func(*handrollv1.WebApp) map[string]string { return map[string]string{key: value} }
	for _, ix := range []cache.Indexer{u.deployments, u.services, u.configMaps} {
		for _, o := range ix.List() {
			obj := decoded[metav1.Object](t, o)
			if obj.GetLabels()[LabelManagedBy] != ManagedBy {
				continue // the referenced ConfigMap is not a child
			}
			labels := maps.Clone(obj.GetLabels())
			labels[key] = value
			obj.SetLabels(labels)
			cacheChild(t, ix, obj)
		}
	}
	u.reconcile(t)
}
