package manifests

import (
	"bytes"
	"encoding/json"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

// The namespace the user's overlay moves handroll to.
const elsewhere = "ops-elsewhere"

// The ports the policies open, by the Deployment's container port names;
// health stays closed, the kubelet probing from the node (see
// manifests/network-policy/kustomization.yaml).
var policyPorts = map[string]string{
	"handroll-allow-metrics-traffic": "metrics",
	"handroll-allow-webhook-traffic": "webhook",
}

// TestNetworkPolicyComponent builds the overlay manifests/network-policy
// shows (namespace, manifests/default, the component) and checks that the
// policies land in the overlay's namespace, select the operator's pods and
// nothing else, open the metrics port to namespaces labelled
// metrics=enabled and the webhook port to any source, and that a real API
// server accepts them. That they are enforced is not tested: that takes a
// network plugin that enforces NetworkPolicy.
func TestNetworkPolicyComponent(t *testing.T) {
	kubectl := kubectlPath(t)
	if _, ok := findKind(kustomize(t, kubectl, "default"), "NetworkPolicy"); ok {
		t.Errorf("manifests/default holds a NetworkPolicy; the policies are optional, in manifests/network-policy")
	}
	objs := kustomizePath(t, kubectl, installOverlay(t, elsewhere, "network-policy"), "the overlay with manifests/network-policy")
	without := kustomizePath(t, kubectl, installOverlay(t, elsewhere), "the overlay without it")

	// The component adds the policies and changes nothing else.
	checkOnlyPoliciesAdded(t, objs, without)

	pod, containerPorts := overlayPod(t, objs)
	var policies []*networkingv1.NetworkPolicy
	for _, name := range slices.Sorted(maps.Keys(policyPorts)) {
		np := get[networkingv1.NetworkPolicy](t, objs, objectKey("NetworkPolicy", elsewhere, name))
		policies = append(policies, np)
		checkPolicy(t, name, np, pod, containerPorts)
	}

	// A real API server takes them as they are, in the overlay's namespace.
	checkAPIServerTakesPolicies(t, kubectl, objs, policies)
}

// checkOnlyPoliciesAdded checks that objs are without and the policies of
// policyPorts, in the overlay's namespace.
func checkOnlyPoliciesAdded(t *testing.T, objs, without built) {
	t.Helper()
	var added []string
	for key, u := range objs {
		if w, ok := without[key]; !ok {
			added = append(added, key)
		} else if !apiequality.Semantic.DeepEqual(u.Object, w.Object) {
			t.Errorf("manifests/network-policy changes %s", key)
		}
	}
	slices.Sort(added)
	var want []string
	for _, name := range slices.Sorted(maps.Keys(policyPorts)) {
		want = append(want, objectKey("NetworkPolicy", elsewhere, name))
	}
	if !slices.Equal(added, want) {
		t.Fatalf("manifests/network-policy adds %v to the overlay, want %v", added, want)
	}
}

// overlayPod returns the pod template of the overlay's Deployment, and its
// containers' ports by name.
func overlayPod(t *testing.T, objs built) (corev1.PodTemplateSpec, map[string]int32) {
	t.Helper()
	depKey, ok := findKind(objs, "Deployment")
	if !ok || depKey != objectKey("Deployment", elsewhere, "handroll") {
		t.Fatalf("the overlay's Deployment is %q, want %s", depKey, objectKey("Deployment", elsewhere, "handroll"))
	}
	pod := get[appsv1.Deployment](t, objs, depKey).Spec.Template
	containerPorts := map[string]int32{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			containerPorts[p.Name] = p.ContainerPort
		}
	}
	return pod, containerPorts
}

// checkPolicy checks that policy name selects the operator's pods alone
// and lets in only its port, from the sources it names.
func checkPolicy(t *testing.T, name string, np *networkingv1.NetworkPolicy, pod corev1.PodTemplateSpec, containerPorts map[string]int32) {
	t.Helper()
	// An empty podSelector would isolate every pod of the namespace,
	// which the overlay may share with other workloads.
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil || sel.Empty() || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("%s: podSelector %v must select the Deployment's pods %v, and only them", name, np.Spec.PodSelector, pod.Labels)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("%s: policyTypes %v, want [Ingress]: egress stays open, the operator calls the API server", name, np.Spec.PolicyTypes)
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 {
		t.Fatalf("%s: want one ingress rule with one port, have %+v", name, np.Spec.Ingress)
	}
	rule := np.Spec.Ingress[0]
	p := rule.Ports[0]
	portName := policyPorts[name]
	if !portIs(p, portName, containerPorts) {
		t.Errorf("%s: opens port %v, want the container port %s (%d), TCP", name, p.Port, portName, containerPorts[portName])
	}

	switch portName {
	case "metrics":
		want := []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "enabled"}}}}
		if !apiequality.Semantic.DeepEqual(rule.From, want) {
			t.Errorf("%s: from %s, want only namespaces labelled metrics=enabled (any pod in them)", name, asJSON(rule.From))
		}
	case "webhook":
		// The API server is on the host network or outside the
		// cluster: no selector matches it.
		if len(rule.From) != 0 {
			t.Errorf("%s: from %s, want any source: no namespace or pod selector matches the API server", name, asJSON(rule.From))
		}
	}
}

// checkAPIServerTakesPolicies creates the policies on a real API server,
// in the overlay's namespace, and checks that it stores them as they are.
func checkAPIServerTakesPolicies(t *testing.T, kubectl string, objs built, policies []*networkingv1.NetworkPolicy) {
	t.Helper()
	cp := startAPIServer(t)
	ctx, cancel := budget.Context(t, t.Context(), time.Minute, "the API server to take the NetworkPolicies")
	defer cancel()
	kube := cp.KubeClient(t)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, np := range policies {
		data, err := json.Marshal(objs[objectKey("NetworkPolicy", np.Namespace, np.Name)].Object)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, data)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig="+cp.Kubeconfig, "create", "--validate=strict", "-f", "-")
	cmd.Stdin, cmd.Stderr = bytes.NewReader(bytes.Join(docs, []byte("\n---\n"))), &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("kubectl create the policies: %v\n%s%s", err, out, stderr.Bytes())
	}
	for _, np := range policies {
		got, err := kube.NetworkingV1().NetworkPolicies(elsewhere).Get(ctx, np.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(got.Spec, np.Spec) {
			t.Errorf("the API server stored %s as %s, the manifest says %s", np.Name, asJSON(got.Spec), asJSON(np.Spec))
		}
	}
}

// portIs says whether a policy port is the container port name, by name or
// number, over TCP (the default).
func portIs(p networkingv1.NetworkPolicyPort, name string, containerPorts map[string]int32) bool {
	if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP || p.Port == nil || p.EndPort != nil {
		return false
	}
	if p.Port.Type == intstr.String {
		return p.Port.StrVal == name
	}
	return containerPorts[name] != 0 && p.Port.IntVal == containerPorts[name]
}

// findKind returns the key of the one object of kind in objs.
func findKind(objs built, kind string) (string, bool) {
	var keys []string
	for key, u := range objs {
		if u.GetKind() == kind {
			keys = append(keys, key)
		}
	}
	if len(keys) != 1 {
		return strings.Join(keys, ", "), false
	}
	return keys[0], true
}

// startAPIServer starts etcd and kube-apiserver for t alone, with a budget
// of their own, and stops them when t ends; the rest of this package needs
// none.
func startAPIServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.StartWithBudget(controlplane.Options{})
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the control plane's logs end with:\n%s", cp.Logs(40))
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return cp
}

func asJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
