package webapp

import (
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

func testWebApp() *handrollv1.WebApp {
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "ns", UID: types.UID("uid-1"), Generation: 3},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](2),
			Env:      []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.1")},
			},
			Config:       map[string]string{"a.yaml": "x: 1"},
			ConfigMapRef: &handrollv1.ConfigMapReference{Name: "shared"},
		},
	}
	handrollv1.SetObjectDefaults_WebApp(w)
	return w
}

// roundTrip turns an apply configuration into the typed object the API
// server would store (without server defaults).
func roundTrip[T any](t testing.TB, ac any) *T {
	t.Helper()
	data, err := json.Marshal(ac)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestDesiredDeployment(t *testing.T) {
	w := testWebApp()
	d := roundTrip[appsv1.Deployment](t, DesiredDeployment(w, refConfigMap(map[string]string{"k": "v"}, nil)))

	if d.Name != "shop" || d.Namespace != "ns" || *d.Spec.Replicas != 2 {
		t.Errorf("name %s/%s replicas %d", d.Namespace, d.Name, *d.Spec.Replicas)
	}
	owner := metav1.GetControllerOf(d)
	if owner == nil || owner.UID != w.UID || owner.Kind != "WebApp" || owner.APIVersion != "handroll.dev/v1" || !*owner.BlockOwnerDeletion {
		t.Errorf("controller reference %+v", owner)
	}
	if d.Labels[LabelManagedBy] != "handroll" || d.Spec.Template.Labels[LabelInstance] != "shop" {
		t.Errorf("labels %v, template labels %v", d.Labels, d.Spec.Template.Labels)
	}
	for k, v := range d.Spec.Selector.MatchLabels {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("the selector %v does not select the template's labels %v", d.Spec.Selector.MatchLabels, d.Spec.Template.Labels)
		}
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 || c.Resources.Requests.Cpu().MilliValue() != 100 {
		t.Errorf("container %+v", c)
	}
	var names []string
	for _, e := range c.Env {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, ","); got != "MODE,POD,HANDROLL_WEBAPP,HANDROLL_PORT" {
		t.Errorf("env %s", got)
	}
	if c.Env[1].ValueFrom == nil || c.Env[1].ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Errorf("valueFrom lost: %+v", c.Env[1])
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	if mounts["config"] != ConfigDir || mounts["configmap"] != ConfigMapDir {
		t.Errorf("mounts %v", mounts)
	}
	vols := map[string]string{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		vols[v.Name] = v.ConfigMap.Name
	}
	if vols["config"] != "shop-config" || vols["configmap"] != "shared" {
		t.Errorf("volumes %v", vols)
	}
	if d.Annotations[AnnotationAppliedHash] == "" || d.Spec.Template.Annotations[AnnotationConfigHash] == "" {
		t.Errorf("annotations %v, template annotations %v", d.Annotations, d.Spec.Template.Annotations)
	}
}

// refConfigMap is a referenced ConfigMap with data and binaryData.
func refConfigMap(data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "ns"}, Data: data, BinaryData: binary}
}

func TestConfigChangesRollThePods(t *testing.T) {
	w := testWebApp()
	hash := func(w *handrollv1.WebApp, ref *corev1.ConfigMap) string {
		return roundTrip[appsv1.Deployment](t, DesiredDeployment(w, ref)).Spec.Template.Annotations[AnnotationConfigHash]
	}
	base := hash(w, refConfigMap(map[string]string{"k": "v"}, map[string][]byte{"b": {0, 1}}))
	if again := hash(testWebApp(), refConfigMap(map[string]string{"k": "v"}, map[string][]byte{"b": {0, 1}})); again != base {
		t.Fatalf("the same input gave different hashes: %s, %s", base, again)
	}
	changedConfig := testWebApp()
	changedConfig.Spec.Config["a.yaml"] = "x: 2"
	for name, got := range map[string]string{
		"spec.config changed":               hash(changedConfig, refConfigMap(map[string]string{"k": "v"}, map[string][]byte{"b": {0, 1}})),
		"the referenced data changed":       hash(w, refConfigMap(map[string]string{"k": "w"}, map[string][]byte{"b": {0, 1}})),
		"the referenced binaryData changed": hash(w, refConfigMap(map[string]string{"k": "v"}, map[string][]byte{"b": {0, 2}})),
		"a binaryData key was added":        hash(w, refConfigMap(map[string]string{"k": "v"}, map[string][]byte{"b": {0, 1}, "c": nil})),
		"the binaryData was emptied":        hash(w, refConfigMap(map[string]string{"k": "v"}, nil)),
		"the referenced map vanished":       hash(w, nil),
	} {
		if got == base {
			t.Errorf("%s: the pod template's config hash did not change", name)
		}
	}
	// A key moving between the sources is a change too.
	for name, pair := range map[string][2]string{
		"spec.config and data":  {ConfigHash(map[string]string{"a": "1"}, nil), ConfigHash(nil, refConfigMap(map[string]string{"a": "1"}, nil))},
		"data and binaryData":   {ConfigHash(nil, refConfigMap(map[string]string{"a": "1"}, nil)), ConfigHash(nil, refConfigMap(nil, map[string][]byte{"a": []byte("1")}))},
		"config and binaryData": {ConfigHash(map[string]string{"a": "1"}, nil), ConfigHash(nil, refConfigMap(nil, map[string][]byte{"a": []byte("1")}))},
	} {
		if pair[0] == pair[1] {
			t.Errorf("ConfigHash does not tell %s apart", name)
		}
	}
}

// TestConfigHashIsStable: for a ConfigMap without binaryData the hash is the
// one earlier versions computed, so upgrading rolls no pods. The values were
// computed by the version that hashed data alone.
func TestConfigHashIsStable(t *testing.T) {
	for _, tc := range []struct {
		config map[string]string
		ref    *corev1.ConfigMap
		want   string
	}{
		{nil, nil, "96a296d224f285c6"},
		{map[string]string{"a.yaml": "x: 1"}, nil, "57ee199ad5f92f39"},
		{map[string]string{"a.yaml": "x: 1"}, refConfigMap(map[string]string{"k": "v"}, nil), "eeeab557fbcd0707"},
		{map[string]string{"a.yaml": "x: 1"}, refConfigMap(map[string]string{"k": "v"}, map[string][]byte{}), "eeeab557fbcd0707"},
	} {
		if got := ConfigHash(tc.config, tc.ref); got != tc.want {
			t.Errorf("ConfigHash(%v, %v) = %s, want %s as before", tc.config, tc.ref, got, tc.want)
		}
	}
}

func TestDesiredServiceAndConfigMap(t *testing.T) {
	w := testWebApp()
	s := roundTrip[corev1.Service](t, DesiredService(w))
	if s.Spec.Type != corev1.ServiceTypeClusterIP || s.Spec.Ports[0].Port != 80 || s.Spec.Ports[0].TargetPort.StrVal != "http" {
		t.Errorf("service spec %+v", s.Spec)
	}
	if s.Spec.Selector[LabelInstance] != "shop" {
		t.Errorf("selector %v", s.Spec.Selector)
	}

	w.Spec.Service = &handrollv1.WebAppService{Type: ptr.To(handrollv1.ServiceTypeNodePort), Port: ptr.To[int32](8000), NodePort: 30080}
	s = roundTrip[corev1.Service](t, DesiredService(w))
	if s.Spec.Type != corev1.ServiceTypeNodePort || s.Spec.Ports[0].NodePort != 30080 || s.Spec.Ports[0].Port != 8000 {
		t.Errorf("NodePort service spec %+v", s.Spec)
	}
	if URL(w) != "http://shop.ns.svc:8000" {
		t.Errorf("URL %s", URL(w))
	}

	cm := roundTrip[corev1.ConfigMap](t, DesiredConfigMap(w))
	if cm.Name != "shop-config" || cm.Data["a.yaml"] != "x: 1" || metav1.GetControllerOf(cm) == nil {
		t.Errorf("configmap %+v", cm)
	}
	w.Spec.Config = nil
	if DesiredConfigMap(w) != nil {
		t.Error("a WebApp without spec.config got a ConfigMap")
	}
}

// TestUpToDateMeansTheAppliedHashAndEveryDesiredValue: the rule at
// FirstDifference. A child is up to date when it carries desired's applied
// hash and holds every value desired sets; server defaults, status and
// other managers' fields do not count.
func TestUpToDateMeansTheAppliedHashAndEveryDesiredValue(t *testing.T) {
	w := testWebApp()
	desired := DesiredDeployment(w, nil)
	live := roundTrip[appsv1.Deployment](t, desired)
	// As an informer hands it out: typed, with no apiVersion or kind.
	live.TypeMeta = metav1.TypeMeta{}
	// What the API server adds: defaults, status, metadata, other managers.
	live.ResourceVersion = "42"
	live.Spec.Template.Spec.Containers[0].ImagePullPolicy = corev1.PullIfNotPresent
	live.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	live.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	live.Annotations["deployment.kubernetes.io/revision"] = "1"
	live.Status.Replicas = 2
	live.Spec.Template.Spec.Containers[0].Env = append(live.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "INJECTED", Value: "by a webhook"})

	check := func(name string, live *appsv1.Deployment, want bool) {
		t.Helper()
		diff, err := FirstDifference(desired, live)
		if err != nil {
			t.Fatal(err)
		}
		if got := diff == ""; got != want {
			t.Errorf("%s: FirstDifference = %q, want up to date: %v", name, diff, want)
		}
	}
	check("as applied, plus server defaults and foreign fields", live, true)

	scaled := live.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](5)
	check("replicas edited by hand", scaled, false)

	image := live.DeepCopy()
	image.Spec.Template.Spec.Containers[0].Image = "evil:1"
	check("image edited by hand", image, false)

	lostEnv := live.DeepCopy()
	lostEnv.Spec.Template.Spec.Containers[0].Env = lostEnv.Spec.Template.Spec.Containers[0].Env[1:]
	check("an env var we set was removed", lostEnv, false)

	oldHash := live.DeepCopy()
	oldHash.Annotations[AnnotationAppliedHash] = "0000"
	check("applied by an older spec", oldHash, false)

	// Removing an env var from the WebApp changes the hash: the subset test
	// alone would pass, the hash makes the apply happen.
	w2 := w.DeepCopy()
	w2.Spec.Env = w2.Spec.Env[:1]
	if diff, _ := FirstDifference(DesiredDeployment(w2, nil), live); diff == "" {
		t.Error("a WebApp whose env shrank is considered applied")
	}
}

// TestFirstDifferenceEmptyValues: a value the API server stores as absent
// (env[].value "") is up to date when absent, but drift when someone sets
// it; a zero the API server keeps (replicas 0, optional false) must be there.
func TestFirstDifferenceEmptyValues(t *testing.T) {
	w := testWebApp()
	w.Spec.Replicas = ptr.To[int32](0)
	w.Spec.Env = []corev1.EnvVar{
		{Name: "EMPTY"},
		{Name: "CM", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "k", Optional: ptr.To(false)}}},
	}
	desired := DesiredDeployment(w, nil)
	// As the API server stores it: through the typed object, omitempty and all.
	live := roundTrip[appsv1.Deployment](t, desired)
	live.TypeMeta = metav1.TypeMeta{}
	if data, _ := json.Marshal(live); strings.Contains(string(data), `"value":""`) {
		t.Fatalf("the stored form still has the empty value: %s", data)
	}

	check := func(name string, live *appsv1.Deployment, wantDiff string) {
		t.Helper()
		diff, err := FirstDifference(desired, live)
		if err != nil {
			t.Fatal(err)
		}
		if diff != wantDiff {
			t.Errorf("%s: FirstDifference = %q, want %q", name, diff, wantDiff)
		}
	}
	check("as stored", live, "")

	env := ".spec.template.spec.containers[name=app].env[name=EMPTY].value"
	set := live.DeepCopy()
	set.Spec.Template.Spec.Containers[0].Env[0].Value = "x"
	check("the empty env var was given a value", set, env)

	noReplicas := live.DeepCopy()
	noReplicas.Spec.Replicas = nil
	check("replicas 0 is kept by the API, so its absence is drift", noReplicas, ".spec.replicas")

	noOptional := live.DeepCopy()
	noOptional.Spec.Template.Spec.Containers[0].Env[1].ValueFrom.ConfigMapKeyRef.Optional = nil
	check("optional: false is kept by the API, so its absence is drift", noOptional,
		".spec.template.spec.containers[name=app].env[name=CM].valueFrom.configMapKeyRef.optional")
}

func TestComputeStatus(t *testing.T) {
	now := metav1.Now()
	w := testWebApp()
	for _, tc := range computeStatusCases() {
		t.Run(tc.name, func(t *testing.T) {
			st := ComputeStatus(w, tc.observed, now)
			checkComputedStatus(t, st, tc)
		})
	}

	// A recomputed status with nothing new keeps the transition times, so
	// the reconciler sees no difference and writes nothing.
	w.Status = ComputeStatus(w, Observed{Deployment: statusDeployment(1, 1, 2, 2, 2, 2), ServiceExists: true}, now)
	later := metav1.NewTime(now.Add(3600e9))
	again := ComputeStatus(w, Observed{Deployment: statusDeployment(1, 1, 2, 2, 2, 2), ServiceExists: true}, later)
	if conditionIn(again, handrollv1.ConditionReady).LastTransitionTime != now {
		t.Error("an unchanged Ready condition got a new lastTransitionTime")
	}
	flipped := ComputeStatus(w, Observed{Deployment: statusDeployment(1, 1, 2, 2, 1, 1), ServiceExists: true}, later)
	if conditionIn(flipped, handrollv1.ConditionReady).LastTransitionTime != later {
		t.Error("Ready turned False without a new lastTransitionTime")
	}
	if c := conditionIn(flipped, handrollv1.ConditionReconciling); c.Status != metav1.ConditionTrue || c.LastTransitionTime != later {
		t.Errorf("a rollout under way again: Reconciling %+v, want True since %v", c, later)
	}

	// Reconciling stays True, with its first transition time, through a
	// rollout; Stalled replaces it, and convergence removes both.
	w.Status = flipped
	evenLater := metav1.NewTime(later.Add(3600e9))
	still := ComputeStatus(w, Observed{Deployment: statusDeployment(1, 1, 2, 1, 1, 1), ServiceExists: true}, evenLater)
	if c := conditionIn(still, handrollv1.ConditionReconciling); c.LastTransitionTime != later {
		t.Errorf("Reconciling, still True, moved its lastTransitionTime: %+v", c)
	}
	w.Status = still
	conflict := ComputeStatus(w, Observed{Conflict: "Service ns/shop"}, evenLater)
	if c := conditionIn(conflict, handrollv1.ConditionReconciling); c.Type != "" {
		t.Errorf("Reconciling kept beside Stalled: %+v", c)
	}
	w.Status = conflict
	healed := ComputeStatus(w, Observed{Deployment: statusDeployment(1, 1, 2, 2, 2, 2), ServiceExists: true}, evenLater)
	for _, c := range healed.Conditions {
		if c.Type == handrollv1.ConditionReconciling || c.Type == handrollv1.ConditionStalled {
			t.Errorf("a converged WebApp still has %+v", c)
		}
	}
}

// statusDeployment is a Deployment at generation gen with the given status.
func statusDeployment(gen, obs int64, replicas, updated, ready, available int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: gen},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: obs, Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready, AvailableReplicas: available},
	}
}

// conditionIn is st's condition of type t, or the zero condition.
func conditionIn(st handrollv1.WebAppStatus, t string) metav1.Condition {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c
		}
	}
	return metav1.Condition{}
}

// withStatusCondition adds a condition to d's status.
func withStatusCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason string) *appsv1.Deployment {
	d.Status.Conditions = append(d.Status.Conditions, appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: reason})
	return d
}

// computeStatusCase is what ComputeStatus must make of what was observed.
// reconciling and stalled are the abnormal-true conditions: "" means
// absent, and at most one of them is ever present.
type computeStatusCase struct {
	name                         string
	observed                     Observed
	ready, progressing, degraded metav1.ConditionStatus
	readyReason                  string
	reconciling, stalled         string // the reason, "" for absent
}

// computeStatusCases are TestComputeStatus's cases.
func computeStatusCases() []computeStatusCase {
	dep, withCondition := statusDeployment, withStatusCondition
	return []computeStatusCase{
		{"nothing created yet", Observed{}, "False", "True", "False", ReasonPending, ReasonPending, ""},
		{"rolling out", Observed{Deployment: dep(1, 1, 2, 1, 1, 1), ServiceExists: true}, "False", "True", "False", ReasonRollingOut, ReasonRollingOut, ""},
		{"controller has not seen the new generation", Observed{Deployment: dep(2, 1, 2, 2, 2, 2), ServiceExists: true}, "False", "True", "False", ReasonRollingOut, ReasonRollingOut, ""},
		{"scaling up", Observed{Deployment: dep(1, 1, 1, 1, 1, 1), ServiceExists: true}, "False", "True", "False", ReasonRollingOut, ReasonRollingOut, ""},
		{"a pod lost once rolled out", Observed{ServiceExists: true,
			Deployment: withCondition(dep(1, 1, 2, 2, 1, 1), appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewReplicaSetAvailable)},
			"False", "True", "False", ReasonDeploymentNotReady, ReasonRollingOut, ""},
		{"all ready", Observed{Deployment: dep(1, 1, 2, 2, 2, 2), ServiceExists: true}, "True", "False", "False", ReasonAvailable, "", ""},
		{"all ready but no Service", Observed{Deployment: dep(1, 1, 2, 2, 2, 2)}, "False", "False", "False", ReasonPending, ReasonPending, ""},
		{"a foreign object holds a name", Observed{Conflict: "Service ns/shop"}, "False", "False", "True", ReasonResourceConflict, "", ReasonResourceConflict},
		{"the API server refuses a child", Observed{ApplyFailed: "Service ns/shop: nodePort taken"}, "False", "False", "True", ReasonApplyFailed, "", ReasonApplyFailed},
		{"past the progress deadline", Observed{ServiceExists: true,
			Deployment: withCondition(dep(1, 1, 2, 1, 1, 1), appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonProgressDeadlineExceeded)},
			"False", "False", "True", ReasonRolloutFailed, "", ReasonProgressDeadlineExceeded},
		{"pods refused, within the deadline", Observed{ServiceExists: true,
			Deployment: withCondition(dep(1, 1, 2, 1, 1, 1), appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, "FailedCreate")},
			"False", "True", "True", ReasonDeploymentNotReady, ReasonRollingOut, ""},
	}
}

// checkComputedStatus checks st, computed for tc, against tc.
func checkComputedStatus(t *testing.T, st handrollv1.WebAppStatus, tc computeStatusCase) {
	t.Helper()
	// Only a Service the WebApp controls is advertised.
	wantURL := ""
	if tc.observed.ServiceExists {
		wantURL = "http://shop.ns.svc:80"
	}
	if st.ObservedGeneration != 3 || st.URL != wantURL || st.Selector != "app.kubernetes.io/instance=shop,app.kubernetes.io/name=webapp" {
		t.Errorf("status %+v", st)
	}
	for typ, want := range map[string]metav1.ConditionStatus{
		handrollv1.ConditionReady: tc.ready, handrollv1.ConditionProgressing: tc.progressing, handrollv1.ConditionDegraded: tc.degraded,
	} {
		if got := conditionIn(st, typ); got.Status != want || got.ObservedGeneration != 3 || got.Reason == "" {
			t.Errorf("%s = %s (%s), want %s", typ, got.Status, got.Reason, want)
		}
	}
	if got := conditionIn(st, handrollv1.ConditionReady).Reason; got != tc.readyReason {
		t.Errorf("Ready reason %s, want %s", got, tc.readyReason)
	}
	for typ, want := range map[string]string{handrollv1.ConditionReconciling: tc.reconciling, handrollv1.ConditionStalled: tc.stalled} {
		got := conditionIn(st, typ)
		if want == "" && got.Type != "" {
			t.Errorf("%s present: %+v", typ, got)
		}
		if want != "" && (got.Status != metav1.ConditionTrue || got.Reason != want || got.ObservedGeneration != 3) {
			t.Errorf("%s = %s (%s), want True (%s)", typ, got.Status, got.Reason, want)
		}
	}
}
