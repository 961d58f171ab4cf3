package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/pkg/admission"
	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/test/controlplane"
)

// kubectlPath finds the kubectl that hack/testbin.sh builds, as
// test/controlplane finds the control plane: KUBEBUILDER_ASSETS when it
// holds kubectl, else `hack/testbin.sh path` (which builds it on first use).
func kubectlPath(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: building the manifests needs kubectl from hack/testbin.sh, which the first time takes many minutes to build")
	}
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if assets := os.Getenv("KUBEBUILDER_ASSETS"); assets != "" && isExec(filepath.Join(assets, "kubectl")) {
		return filepath.Join(assets, "kubectl")
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join(root, "hack", "testbin.sh"), "path")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hack/testbin.sh path: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := filepath.Join(strings.TrimSpace(lines[len(lines)-1]), "kubectl")
	if !isExec(p) {
		t.Fatalf("no kubectl at %s; run 'make testbin'", p)
	}
	return p
}

// built is the output of `kubectl kustomize` of one directory, by
// "Kind namespace/name".
type built map[string]*unstructured.Unstructured

func kustomize(t *testing.T, kubectl, dir string) built {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return kustomizePath(t, kubectl, filepath.Join(root, "manifests", dir), "manifests/"+dir)
}

// kustomizePath builds the kustomization at path; what names it in messages.
func kustomizePath(t *testing.T, kubectl, path, what string) built {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", what, err, stderr.Bytes())
	}
	return parseBuilt(t, out, what)
}

// installOverlay writes, in a temporary directory, the overlay a user
// writes to install manifests/default into namespace (none: its own), with
// the given components of manifests/, and returns its directory.
func installOverlay(t *testing.T, namespace string, components ...string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes bases by relative path only.
	rel := func(p string) string {
		r, err := filepath.Rel(dir, filepath.Join(root, "manifests", p))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
	if namespace != "" {
		k += "namespace: " + namespace + "\n"
	}
	k += "resources:\n- " + rel("default") + "\n"
	if len(components) > 0 {
		k += "components:\n"
		for _, c := range components {
			k += "- " + rel(c) + "\n"
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// parseBuilt decodes multi-document YAML into objects by key, failing t on
// an object given twice.
func parseBuilt(t *testing.T, data []byte, what string) built {
	t.Helper()
	docs, err := splitYAML(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	objs := built{}
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &u.Object); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		key := objectKey(u.GetKind(), u.GetNamespace(), u.GetName())
		if _, dup := objs[key]; dup {
			t.Fatalf("%s holds %s twice", what, key)
		}
		objs[key] = u
	}
	return objs
}

// get converts the object at key into T, failing t when it is absent.
func get[T any](t *testing.T, objs built, key string) *T {
	t.Helper()
	u, ok := objs[key]
	if !ok {
		t.Fatalf("the build has no %s", key)
	}
	x := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, x, true); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return x
}

// TestDefaultBuilds builds manifests/default as `kubectl apply -k` would and
// checks that it yields exactly the expected objects, and that they fit
// together: the Services reach the Deployment's named ports, the webhooks
// call the paths pkg/admission serves, and nothing carries a CA bundle that
// the operator is meant to inject.
func TestDefaultBuilds(t *testing.T) {
	kubectl := kubectlPath(t)
	objs := kustomize(t, kubectl, "default")
	checkDefaultObjects(t, objs)

	ns := get[corev1.Namespace](t, objs, "Namespace handroll-system")
	if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s is not labelled pod-security.kubernetes.io/enforce=restricted", ns.Name)
	}

	pod, ports := checkDefaultDeployment(t, objs)
	checkServicesTargetThePod(t, objs, pod, ports)
	webhookSvc := get[corev1.Service](t, objs, "Service handroll-system/handroll-webhook")
	if len(webhookSvc.Spec.Ports) != 1 || webhookSvc.Spec.Ports[0].Port != 443 || webhookSvc.Spec.Ports[0].TargetPort.StrVal != "webhook" {
		t.Errorf("Service handroll-webhook ports %+v, want 443 to the named port webhook", webhookSvc.Spec.Ports)
	}
	checkAdmissionWebhooks(t, objs, webhookSvc.Name)
	checkConversionWebhook(t, objs, webhookSvc.Name)
	checkResourceNamesDefined(t, objs)
}

// defaultBuild is what manifests/default must build, exactly.
var defaultBuild = []string{
	"Namespace handroll-system",
	"CustomResourceDefinition webapps.handroll.dev",
	"ServiceAccount handroll-system/handroll",
	"Role handroll-system/handroll-leader-election",
	"Role handroll-system/handroll-webhook-certs",
	"RoleBinding handroll-system/handroll-leader-election",
	"RoleBinding handroll-system/handroll-webhook-certs",
	"ClusterRole handroll-manager",
	"ClusterRole handroll-metrics-reader",
	"ClusterRole handroll-webhook-certs",
	"ClusterRole webapp-admin",
	"ClusterRole webapp-editor",
	"ClusterRole webapp-viewer",
	"ClusterRoleBinding handroll-manager",
	"ClusterRoleBinding handroll-webhook-certs",
	"Deployment handroll-system/handroll",
	"PodDisruptionBudget handroll-system/handroll",
	"Service handroll-system/handroll-metrics",
	"Service handroll-system/handroll-webhook",
	"MutatingWebhookConfiguration handroll",
	"ValidatingWebhookConfiguration handroll",
}

// checkDefaultObjects fails t unless objs are defaultBuild, exactly.
func checkDefaultObjects(t *testing.T, objs built) {
	t.Helper()
	want := slices.Clone(defaultBuild)
	var got []string
	for k := range objs {
		got = append(got, k)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("manifests/default builds\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// checkDefaultDeployment checks the operator's Deployment: its
// ServiceAccount, one container, no volumes, and flags that name what the
// manifests define. It returns the pod template and the container's ports
// by name.
func checkDefaultDeployment(t *testing.T, objs built) (corev1.PodTemplateSpec, map[string]int32) {
	t.Helper()
	dep := get[appsv1.Deployment](t, objs, "Deployment handroll-system/handroll")
	pod := dep.Spec.Template
	if pod.Spec.ServiceAccountName != operatorSA {
		t.Errorf("the Deployment runs as ServiceAccount %q, the RBAC binds %q", pod.Spec.ServiceAccountName, operatorSA)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the Deployment has %d containers, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	args := map[string]string{}
	for _, a := range c.Args {
		name, value, _ := strings.Cut(a, "=")
		args[name] = value
	}
	if len(pod.Spec.Volumes) != 0 || len(c.VolumeMounts) != 0 {
		t.Errorf("the Deployment mounts volumes %v: the webhook certificates come from the Secret through the API", pod.Spec.Volumes)
	}
	if p := args["--webhook-port"]; (p != "" && p != "9443") || ports["webhook"] != 9443 {
		t.Errorf("the webhook server listens on --webhook-port=%s (default 9443); the container port named webhook is %d", p, ports["webhook"])
	}
	// The names the operator's flags default to are the ones the RBAC
	// grants by resourceNames and manifests/webhook defines.
	for flag, name := range map[string]string{
		"--operator-namespace":         operatorNS,
		"--webhook-secret-name":        "handroll-webhook-tls",
		"--webhook-service-name":       "handroll-webhook",
		"--webhook-configuration-name": "handroll",
		"--conversion-crd":             "webapps.handroll.dev",
	} {
		if v, set := args[flag]; set && v != name {
			t.Errorf("the Deployment sets %s=%s; the manifests (RBAC resourceNames, manifests/webhook) name %s", flag, v, name)
		}
	}
	return pod, ports
}

// checkServicesTargetThePod checks that each Service selects the pod and
// targets a port the container names.
func checkServicesTargetThePod(t *testing.T, objs built, pod corev1.PodTemplateSpec, ports map[string]int32) {
	t.Helper()
	// Each Service selects the operator's pods and targets a port the
	// container declares.
	for _, key := range []string{"Service handroll-system/handroll-metrics", "Service handroll-system/handroll-webhook"} {
		svc := get[corev1.Service](t, objs, key)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s selects %v, which does not match the pod labels %v", key, svc.Spec.Selector, pod.Labels)
		}
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type != intstr.String || ports[p.TargetPort.StrVal] == 0 {
				t.Errorf("%s port %s targets %s, not a port the container names", key, p.Name, p.TargetPort.String())
			}
		}
	}
}

// checkAdmissionWebhooks checks that each webhook configuration has one
// webhook, calling the path pkg/admission serves through Service service.
func checkAdmissionWebhooks(t *testing.T, objs built, service string) {
	t.Helper()
	for kind, path := range map[string]string{
		"MutatingWebhookConfiguration":   admission.DefaulterPath,
		"ValidatingWebhookConfiguration": admission.ValidatorPath,
	} {
		key := objectKey(kind, "", "handroll")
		var hooks []webhook
		data, err := json.Marshal(objs[key].Object["webhooks"])
		if err == nil {
			err = json.Unmarshal(data, &hooks)
		}
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if len(hooks) != 1 {
			t.Fatalf("%s has %d webhooks, want 1", key, len(hooks))
		}
		checkWebhook(t, key+" webhook "+hooks[0].Name, hooks[0], service, path)
	}
}

// checkConversionWebhook checks the CRD's conversion webhook, if it has
// one.
func checkConversionWebhook(t *testing.T, objs built, service string) {
	t.Helper()
	// The CRD's conversion webhook, when it has one, goes through the same
	// Service. (The apiextensions types stay out of this package; the
	// fields are those of apiextensions.k8s.io/v1 CustomResourceConversion.)
	var conversion struct {
		Strategy string `json:"strategy"`
		Webhook  *struct {
			ClientConfig             admissionregistrationv1.WebhookClientConfig `json:"clientConfig"`
			ConversionReviewVersions []string                                    `json:"conversionReviewVersions"`
		} `json:"webhook"`
	}
	data, err := json.Marshal(objs["CustomResourceDefinition webapps.handroll.dev"].Object["spec"].(map[string]any)["conversion"])
	if err == nil {
		err = json.Unmarshal(data, &conversion)
	}
	if err != nil {
		t.Fatalf("the CRD's spec.conversion: %v", err)
	}
	switch {
	case conversion.Strategy != "Webhook":
		t.Logf("the CRD has conversion strategy %q: no conversion webhook to check", conversion.Strategy)
	case conversion.Webhook == nil:
		t.Errorf("the CRD's conversion strategy is Webhook, with no webhook")
	default:
		cc := conversion.Webhook.ClientConfig
		svc := cc.Service
		if cc.URL != nil || svc == nil || svc.Namespace != operatorNS || svc.Name != service ||
			svc.Path == nil || *svc.Path != "/convert" || (svc.Port != nil && *svc.Port != 443) {
			t.Errorf("the CRD's conversion webhook clientConfig %+v, want service %s/%s port 443 path /convert", cc, operatorNS, service)
		}
		if len(cc.CABundle) != 0 {
			t.Errorf("the CRD's conversion webhook carries a caBundle; the operator injects it")
		}
		if !slices.Contains(conversion.Webhook.ConversionReviewVersions, "v1") {
			t.Errorf("the CRD's conversionReviewVersions %v lack v1, the only one pkg/server.ServeConversion speaks", conversion.Webhook.ConversionReviewVersions)
		}
	}
}

// checkResourceNamesDefined checks that what the RBAC names by
// resourceNames is what objs define.
func checkResourceNamesDefined(t *testing.T, objs built) {
	t.Helper()
	// What the RBAC names by resourceNames is what this build defines.
	defined := map[string]bool{}
	for _, u := range objs {
		defined[strings.ToLower(u.GetKind())+"s/"+u.GetName()] = true
	}
	for _, n := range operatorNeeds {
		if n.Scope != cluster {
			continue
		}
		for _, name := range n.ResourceNames {
			if !defined[n.Resource+"/"+name] {
				t.Errorf("operatorNeeds grants %s named %s, which manifests/default does not define", n.Resource, name)
			}
		}
	}
}

// TestMonitoringBuilds builds manifests/default with the monitoring
// component, as a user's overlay does, and checks that its ServiceMonitor
// lands in the install's namespace and scrapes the metrics Service the way
// the Deployment serves it, and that its binding names the reader role.
func TestMonitoringBuilds(t *testing.T) {
	kubectl := kubectlPath(t)
	def := kustomize(t, kubectl, "default")
	mon := kustomizePath(t, kubectl, installOverlay(t, operatorNS, "monitoring"), "manifests/default with manifests/monitoring")

	sm := mon["ServiceMonitor handroll-system/handroll"]
	if sm == nil || sm.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Fatalf("manifests/monitoring has no monitoring.coreos.com/v1 ServiceMonitor handroll-system/handroll")
	}
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Scheme        string `json:"scheme"`
			TokenFile     string `json:"bearerTokenFile"`
			Authorization struct {
				Type        string                   `json:"type"`
				Credentials corev1.SecretKeySelector `json:"credentials"`
			} `json:"authorization"`
			TLSConfig struct {
				CA struct {
					ConfigMap corev1.ConfigMapKeySelector `json:"configMap"`
				} `json:"ca"`
				ServerName         string `json:"serverName"`
				InsecureSkipVerify bool   `json:"insecureSkipVerify"`
			} `json:"tlsConfig"`
		} `json:"endpoints"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(sm.Object["spec"].(map[string]any), &spec); err != nil {
		t.Fatal(err)
	}

	var selected []*corev1.Service
	for key, u := range def {
		if u.GetKind() == "Service" && labels.SelectorFromSet(spec.Selector.MatchLabels).Matches(labels.Set(u.GetLabels())) {
			selected = append(selected, get[corev1.Service](t, def, key))
		}
	}
	if len(selected) != 1 || selected[0].Name != "handroll-metrics" {
		t.Fatalf("the ServiceMonitor's selector %v must select only Service handroll-metrics; it selects %d Services", spec.Selector.MatchLabels, len(selected))
	}
	dep := get[appsv1.Deployment](t, def, "Deployment handroll-system/handroll")
	secure := slices.Contains(dep.Spec.Template.Spec.Containers[0].Args, "--metrics-secure")
	if len(spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(spec.Endpoints))
	}
	ep := spec.Endpoints[0]
	if !slices.ContainsFunc(selected[0].Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
		t.Errorf("the ServiceMonitor scrapes port %q, which Service handroll-metrics does not name", ep.Port)
	}
	if ep.Path != "/metrics" {
		t.Errorf("the ServiceMonitor scrapes %q, want /metrics", ep.Path)
	}
	if secure && (ep.Scheme != "https" || ep.Authorization.Type != "Bearer" || ep.TokenFile != "") {
		t.Errorf("the Deployment serves --metrics-secure: the ServiceMonitor must scrape over https with a bearer token from authorization.credentials (bearerTokenFile is deprecated)")
	}
	if !secure && ep.Scheme == "https" {
		t.Errorf("the Deployment serves plain HTTP metrics: the ServiceMonitor must not scrape over https")
	}
	if secure {
		checkMetricsVerified(t, dep.Spec.Template.Spec.Containers[0].Args, ep.TLSConfig.CA.ConfigMap, ep.TLSConfig.ServerName, ep.TLSConfig.InsecureSkipVerify)
	}

	// The token is the component's own scraper's, and the reader binding
	// names that scraper: no guess at Prometheus's ServiceAccount.
	secret := get[corev1.Secret](t, mon, "Secret handroll-system/"+ep.Authorization.Credentials.Name)
	if secret.Type != corev1.SecretTypeServiceAccountToken || ep.Authorization.Credentials.Key != corev1.ServiceAccountTokenKey {
		t.Errorf("the ServiceMonitor's credentials are key %q of Secret %s of type %s; want token of a ServiceAccount token Secret",
			ep.Authorization.Credentials.Key, secret.Name, secret.Type)
	}
	scraper := secret.Annotations[corev1.ServiceAccountNameKey]
	if mon["ServiceAccount handroll-system/"+scraper] == nil {
		t.Errorf("the token Secret is for ServiceAccount %q, which manifests/monitoring does not make", scraper)
	}
	b := get[rbacv1.ClusterRoleBinding](t, mon, "ClusterRoleBinding handroll-metrics-reader")
	if b.RoleRef.Kind != "ClusterRole" || def["ClusterRole "+b.RoleRef.Name] == nil {
		t.Errorf("ClusterRoleBinding handroll-metrics-reader binds %s %s, which manifests/default does not define", b.RoleRef.Kind, b.RoleRef.Name)
	}
	if _, ok := othersNeed[b.RoleRef.Name]; !ok {
		t.Errorf("ClusterRoleBinding handroll-metrics-reader binds %s, which is not a role meant for others (othersNeed)", b.RoleRef.Name)
	}
	if want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper, Namespace: operatorNS}}; !slices.Equal(b.Subjects, want) {
		t.Errorf("ClusterRoleBinding handroll-metrics-reader binds %v, want exactly the scraper whose token the ServiceMonitor sends, %v", b.Subjects, want)
	}
}

// checkMetricsVerified: the ServiceMonitor trusts the ConfigMap the
// operator publishes its CA in (--metrics-ca-configmap), key ca.crt, for a
// name the metrics certificate holds in any namespace (the Service's short
// name: kustomize names the namespace after the component has run).
func checkMetricsVerified(t *testing.T, args []string, ca corev1.ConfigMapKeySelector, serverName string, insecure bool) {
	t.Helper()
	published := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--metrics-ca-configmap="); ok {
			published = v
		}
	}
	if published == "" || ca.Name != published || ca.Key != "ca.crt" {
		t.Errorf("the ServiceMonitor trusts ConfigMap %q key %q; want the one the Deployment publishes its CA in (--metrics-ca-configmap=%s), key ca.crt", ca.Name, ca.Key, published)
	}
	if insecure || serverName != "handroll-metrics" {
		t.Errorf("the ServiceMonitor checks the name %q (insecureSkipVerify %v); want the metrics Service's handroll-metrics, verified", serverName, insecure)
	}
}

// webhook holds the fields a MutatingWebhook and a ValidatingWebhook share.
type webhook struct {
	Name                    string                                       `json:"name"`
	ClientConfig            admissionregistrationv1.WebhookClientConfig  `json:"clientConfig"`
	Rules                   []admissionregistrationv1.RuleWithOperations `json:"rules"`
	MatchPolicy             *admissionregistrationv1.MatchPolicyType     `json:"matchPolicy"`
	SideEffects             *admissionregistrationv1.SideEffectClass     `json:"sideEffects"`
	FailurePolicy           *admissionregistrationv1.FailurePolicyType   `json:"failurePolicy"`
	AdmissionReviewVersions []string                                     `json:"admissionReviewVersions"`
	TimeoutSeconds          *int32                                       `json:"timeoutSeconds"`
	MatchConditions         []admissionregistrationv1.MatchCondition     `json:"matchConditions"`
}

func checkWebhook(t *testing.T, what string, w webhook, service, path string) {
	t.Helper()
	svc := w.ClientConfig.Service
	if w.ClientConfig.URL != nil || svc == nil || svc.Namespace != operatorNS || svc.Name != service ||
		svc.Path == nil || *svc.Path != path || svc.Port == nil || *svc.Port != 443 {
		t.Errorf("%s: clientConfig %+v, want service %s/%s port 443 path %s", what, w.ClientConfig, operatorNS, service, path)
	}
	if len(w.ClientConfig.CABundle) != 0 {
		t.Errorf("%s: a caBundle in the manifest would be reset by every apply; the operator injects it", what)
	}
	namespaced := admissionregistrationv1.NamespacedScope
	wantRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"handroll.dev"}, APIVersions: []string{"v1"},
			Resources: []string{"webapps"}, Scope: &namespaced},
	}}
	if !apiequality.Semantic.DeepEqual(w.Rules, wantRules) {
		t.Errorf("%s: rules %+v, want CREATE and UPDATE of handroll.dev/v1 webapps only (no subresources)", what, w.Rules)
	}
	if w.MatchPolicy == nil || *w.MatchPolicy != admissionregistrationv1.Equivalent {
		t.Errorf("%s: matchPolicy must be Equivalent, so that v1alpha1 requests are converted to v1 and admitted", what)
	}
	if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("%s: sideEffects must be None (the handlers only compute), or dry runs are refused", what)
	}
	if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("%s: failurePolicy must be Fail, or an unreachable webhook lets invalid WebApps in", what)
	}
	if !slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("%s: admissionReviewVersions %v, want [v1] (pkg/server.ServeAdmission speaks admission.k8s.io/v1)", what, w.AdmissionReviewVersions)
	}
	if w.TimeoutSeconds == nil || *w.TimeoutSeconds < 1 || *w.TimeoutSeconds > 30 {
		t.Errorf("%s: timeoutSeconds must be set, 1 to 30", what)
	}
	// Failing closed must not reach what the webhooks have no say in: the
	// matchConditions leave out updates that keep the spec and updates of
	// a WebApp being deleted (test/webapp shows an admin cleaning up with
	// no replica answering). The validating webhook also decides on the
	// annotation reserved for conversion.
	var exprs []string
	for _, c := range w.MatchConditions {
		exprs = append(exprs, c.Expression)
	}
	all := strings.Join(exprs, "\n")
	want := []string{"request.operation == 'CREATE'", "object.spec != oldObject.spec", "has(object.metadata.deletionTimestamp)"}
	if path == admission.ValidatorPath {
		want = append(want, "'"+handrollv1.V1SpecAnnotation+"'")
	}
	for _, part := range want {
		if !strings.Contains(all, part) {
			t.Errorf("%s: matchConditions %q lack %s", what, exprs, part)
		}
	}
}

// TestLocalBuilds: manifests/local is manifests/default with the operator's
// pods sent to the local cluster's real node, and nothing else changed.
func TestLocalBuilds(t *testing.T) {
	kubectl := kubectlPath(t)
	def, local := kustomize(t, kubectl, "default"), kustomize(t, kubectl, "local")
	for key, u := range def {
		l, ok := local[key]
		if !ok {
			t.Errorf("manifests/local has no %s", key)
			continue
		}
		if key != "Deployment handroll-system/handroll" && !apiequality.Semantic.DeepEqual(u.Object, l.Object) {
			t.Errorf("manifests/local changes %s", key)
		}
	}
	if len(local) != len(def) {
		t.Errorf("manifests/local builds %d objects, manifests/default %d", len(local), len(def))
	}
	d := get[appsv1.Deployment](t, local, "Deployment handroll-system/handroll")
	spec := d.Spec.Template.Spec
	if spec.NodeSelector[controlplane.RealNodeLabel] != "true" {
		t.Errorf("the Deployment's nodeSelector %v does not ask for %s=true", spec.NodeSelector, controlplane.RealNodeLabel)
	}
	tolerates := slices.ContainsFunc(spec.Tolerations, func(tol corev1.Toleration) bool {
		return tol.Key == controlplane.RealNodeTaint && tol.Value == "true" && tol.Effect == corev1.TaintEffectNoSchedule
	})
	if !tolerates {
		t.Errorf("the Deployment's tolerations %v do not tolerate %s=true:NoSchedule", spec.Tolerations, controlplane.RealNodeTaint)
	}
	// The node pulls the image from the local cluster's registry, where
	// make deploy pushed it last: always, so a pod started after a second
	// push of one tag runs the new image.
	if got := spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("the operator's imagePullPolicy on the local cluster is %q, want Always", got)
	}
	want := get[appsv1.Deployment](t, def, "Deployment handroll-system/handroll")
	want.Spec.Template.Spec.NodeSelector, want.Spec.Template.Spec.Tolerations = spec.NodeSelector, spec.Tolerations
	want.Spec.Template.Spec.Containers[0].ImagePullPolicy = spec.Containers[0].ImagePullPolicy
	if !apiequality.Semantic.DeepEqual(want, d) {
		t.Errorf("manifests/local changes the Deployment beyond its nodeSelector, tolerations and imagePullPolicy")
	}
}
