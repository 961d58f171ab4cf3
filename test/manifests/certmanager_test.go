package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/handroll/handroll/test/controlplane"
)

// injectCAFrom is cert-manager's cainjector annotation: the namespace/name
// of the Certificate whose CA goes into the object's caBundle.
const injectCAFrom = "cert-manager.io/inject-ca-from"

// TestCertManagerComponent builds manifests/certmanager on manifests/default
// (handroll-system) and, as its kustomization says, on top of an overlay
// that moves the install to another namespace with manifests/monitoring.
// In each: the Certificates name the Services' DNS names in that namespace
// and are issued by the install's own CA, the webhook configurations and
// the CRD ask cert-manager to inject that Certificate's CA, the Deployment
// reads both pairs from the mounted Secrets and publishes no CA of its
// own, the operator is granted what operatorNeeds lists less the
// self-managed certificates' rows, and the ServiceMonitor verifies the
// metrics certificate against cert-manager's CA. Nothing else changes.
func TestCertManagerComponent(t *testing.T) {
	kubectl := kubectlPath(t)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	moved := installOverlay(t, elsewhere, "monitoring")
	for _, tc := range []struct{ ns, what, dir, without string }{
		{operatorNS, "manifests/default with manifests/certmanager", componentOn(t, filepath.Join(root, "manifests", "default")), filepath.Join(root, "manifests", "default")},
		{elsewhere, "manifests/certmanager on an overlay in " + elsewhere + " with manifests/monitoring", componentOn(t, moved), moved},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			objs := kustomizePath(t, kubectl, tc.dir, tc.what)
			checkCertManagerBuild(t, tc.ns, objs, kustomizePath(t, kubectl, tc.without, tc.what+", without the component"))
		})
	}
}

// componentOn writes a kustomization that adds manifests/certmanager to the
// kustomization in base, and returns its directory.
func componentOn(t *testing.T, base string) string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rel := func(p string) string {
		r, err := filepath.Rel(dir, p)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- " + rel(base) +
		"\ncomponents:\n- " + rel(filepath.Join(root, "manifests", "certmanager")) + "\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// certificate is the part of a cert-manager.io/v1 Certificate read here.
type certificate struct {
	Spec struct {
		IsCA       bool     `json:"isCA"`
		SecretName string   `json:"secretName"`
		DNSNames   []string `json:"dnsNames"`
		IssuerRef  struct {
			Kind string `json:"kind"`
			Name string `json:"name"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

func checkCertManagerBuild(t *testing.T, ns string, objs, without built) {
	checkPlaceholdersReplaced(t, ns, objs)
	secrets := checkCertificates(t, ns, objs)

	for _, key := range []string{"MutatingWebhookConfiguration handroll", "ValidatingWebhookConfiguration handroll", "CustomResourceDefinition webapps.handroll.dev"} {
		if got := objs[key].GetAnnotations()[injectCAFrom]; got != ns+"/handroll-webhook-cert" {
			t.Errorf("%s: %s is %q, want %s/handroll-webhook-cert", key, injectCAFrom, got, ns)
		}
	}

	// The operator reads each Secret from where its flag says.
	checkCertDeployment(t, ns, objs, without, secrets)

	checkCertManagerRBAC(t, ns, objs)

	// The ServiceMonitor, where manifests/monitoring is in the build.
	checkCertServiceMonitor(t, ns, objs, secrets)

	// Nothing else changes; what the component adds is its own.
	checkOnlyCertManagerChanges(t, ns, objs, without)
}

// checkPlaceholdersReplaced checks that no object still holds the
// placeholder NAMESPACE and that cert-manager's objects are in ns.
func checkPlaceholdersReplaced(t *testing.T, ns string, objs built) {
	t.Helper()
	for key, u := range objs {
		if b, _ := yaml.Marshal(u.Object); strings.Contains(string(b), "NAMESPACE.") || strings.Contains(string(b), "NAMESPACE/") {
			t.Errorf("%s still holds the placeholder NAMESPACE", key)
		}
		if u.GroupVersionKind().Group == "cert-manager.io" && u.GetNamespace() != ns {
			t.Errorf("%s is in namespace %q, want %q", key, u.GetNamespace(), ns)
		}
	}
}

// certificateOf returns the Certificate ns/name of the build, failing t
// if there is none.
func certificateOf(t *testing.T, objs built, ns, name string) certificate {
	t.Helper()
	u, ok := objs[objectKey("Certificate", ns, name)]
	if !ok {
		t.Fatalf("the build has no Certificate %s/%s", ns, name)
	}
	var c certificate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkCertificates checks the CA chain and each Service's certificate,
// and returns each Service's certificate Secret.
func checkCertificates(t *testing.T, ns string, objs built) map[string]string {
	t.Helper()
	// The CA chain: a self-signed Issuer makes the CA, whose Issuer signs
	// the serving certificates.
	ca := certificateOf(t, objs, ns, "handroll-ca")
	if !ca.Spec.IsCA || ca.Spec.IssuerRef.Kind != "Issuer" || issuerSpec(t, objs, ns, ca.Spec.IssuerRef.Name)["selfSigned"] == nil {
		t.Errorf("Certificate handroll-ca: want a CA issued by a self-signed Issuer, have %+v", ca.Spec)
	}
	caIssuer, _ := issuerSpec(t, objs, ns, "handroll-ca")["ca"].(map[string]any)
	if caIssuer["secretName"] != ca.Spec.SecretName {
		t.Errorf("Issuer handroll-ca signs with Secret %v, want the CA's %s", caIssuer["secretName"], ca.Spec.SecretName)
	}
	secrets := map[string]string{} // Service → the Secret of its certificate
	for svc, name := range map[string]string{"handroll-webhook": "handroll-webhook-cert", "handroll-metrics": "handroll-metrics-cert"} {
		c := certificateOf(t, objs, ns, name)
		if _, ok := objs[objectKey("Service", ns, svc)]; !ok {
			t.Fatalf("the build has no Service %s/%s", ns, svc)
		}
		want := []string{svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local"}
		if !slices.Equal(c.Spec.DNSNames, want) {
			t.Errorf("Certificate %s: dnsNames %v, want %v", name, c.Spec.DNSNames, want)
		}
		if c.Spec.IssuerRef.Kind != "Issuer" || c.Spec.IssuerRef.Name != "handroll-ca" || c.Spec.IsCA {
			t.Errorf("Certificate %s: issuerRef %+v, want the CA Issuer handroll-ca", name, c.Spec.IssuerRef)
		}
		secrets[svc] = c.Spec.SecretName
	}
	return secrets
}

// checkCertDeployment checks that the operator reads each Secret from where
// its flag says, and that the Deployment changes in nothing else.
func checkCertDeployment(t *testing.T, ns string, objs, without built, secrets map[string]string) {
	t.Helper()
	dep := get[appsv1.Deployment](t, objs, objectKey("Deployment", ns, "handroll"))
	c := dep.Spec.Template.Spec.Containers[0]
	mounted := map[string]string{} // mount path → Secret
	for _, m := range c.VolumeMounts {
		for _, v := range dep.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.Secret != nil && m.ReadOnly {
				mounted[m.MountPath] = v.Secret.SecretName
			}
		}
	}
	for flag, svc := range map[string]string{"--webhook-cert-dir": "handroll-webhook", "--metrics-cert-dir": "handroll-metrics"} {
		dir := ""
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				dir = v
			}
		}
		if dir == "" || mounted[dir] != secrets[svc] {
			t.Errorf("the Deployment passes %s=%q, where Secret %q is mounted read-only; want the Secret of %s's certificate, %s", flag, dir, mounted[dir], svc, secrets[svc])
		}
	}
	if !slices.Contains(c.Args, "--metrics-secure") {
		t.Errorf("the Deployment has --metrics-cert-dir without --metrics-secure, which the operator refuses")
	}
	// --metrics-ca-configmap goes: the operator refuses it beside
	// --webhook-cert-dir, there being no CA of its own to publish.
	wantDep := get[appsv1.Deployment](t, without, objectKey("Deployment", ns, "handroll"))
	wantDep.Spec.Template.Spec.Volumes = dep.Spec.Template.Spec.Volumes
	wantDep.Spec.Template.Spec.Containers[0].VolumeMounts = c.VolumeMounts
	wantArgs := slices.DeleteFunc(wantDep.Spec.Template.Spec.Containers[0].Args, func(a string) bool {
		return strings.HasPrefix(a, "--metrics-ca-configmap=")
	})
	wantArgs = append(wantArgs, "--webhook-cert-dir="+dirOf(c.Args, "--webhook-cert-dir"), "--metrics-cert-dir="+dirOf(c.Args, "--metrics-cert-dir"))
	wantDep.Spec.Template.Spec.Containers[0].Args = wantArgs
	if !apiequality.Semantic.DeepEqual(wantDep, dep) {
		t.Errorf("manifests/certmanager changes the Deployment beyond the two volumes and flags, and dropping --metrics-ca-configmap: args %q", c.Args)
	}
}

// checkCertServiceMonitor checks that the ServiceMonitor, where the build
// has one, verifies the metrics certificate against cert-manager's CA.
func checkCertServiceMonitor(t *testing.T, ns string, objs built, secrets map[string]string) {
	t.Helper()
	if sm, ok := objs[objectKey("ServiceMonitor", ns, "handroll")]; ok {
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		ep, _ := eps[0].(map[string]any)
		cfg, _, _ := unstructured.NestedMap(ep, "tlsConfig")
		secret, _, _ := unstructured.NestedStringMap(cfg, "ca", "secret")
		want := "handroll-metrics." + ns + ".svc"
		if cfg["insecureSkipVerify"] == true || secret["name"] != secrets["handroll-metrics"] || secret["key"] != "ca.crt" || cfg["serverName"] != want {
			t.Errorf("the ServiceMonitor's tlsConfig %v: want ca from Secret %s key ca.crt, serverName %s, and verification on", cfg, secrets["handroll-metrics"], want)
		}
	} else if ns != operatorNS {
		t.Errorf("the overlay with manifests/monitoring has no ServiceMonitor %s/handroll", ns)
	}
}

// checkOnlyCertManagerChanges checks that, against the build without the
// component, nothing else changes and what it adds is cert-manager's.
func checkOnlyCertManagerChanges(t *testing.T, ns string, objs, without built) {
	t.Helper()
	changed := map[string]bool{
		objectKey("Deployment", ns, "handroll"): true, objectKey("ServiceMonitor", ns, "handroll"): true,
		"MutatingWebhookConfiguration handroll": true, "ValidatingWebhookConfiguration handroll": true,
		"CustomResourceDefinition webapps.handroll.dev": true,
	}
	removed := []string{objectKey("Role", ns, "handroll-webhook-certs"), objectKey("RoleBinding", ns, "handroll-webhook-certs"),
		"ClusterRole handroll-webhook-certs", "ClusterRoleBinding handroll-webhook-certs"}
	for key, u := range without {
		w, ok := objs[key]
		switch {
		case slices.Contains(removed, key):
			if ok {
				t.Errorf("the build still holds %s, the self-managed certificates' permissions", key)
			}
		case !ok:
			t.Errorf("manifests/certmanager removes %s", key)
		case !changed[key] && !apiequality.Semantic.DeepEqual(u.Object, w.Object):
			t.Errorf("manifests/certmanager changes %s", key)
		}
	}
	for key, u := range objs {
		if _, ok := without[key]; !ok && u.GroupVersionKind().Group != "cert-manager.io" {
			t.Errorf("manifests/certmanager adds %s, which is not cert-manager's", key)
		}
	}
}

func dirOf(args []string, flag string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	return ""
}

func issuerSpec(t *testing.T, objs built, ns, name string) map[string]any {
	t.Helper()
	u, ok := objs[objectKey("Issuer", ns, name)]
	if !ok {
		t.Fatalf("the build has no Issuer %s/%s", ns, name)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

// selfManagedCerts says whether a need is the self-managed certificates'
// (pkg/certs), which --webhook-cert-dir turns off.
func selfManagedCerts(n need) bool { return strings.HasPrefix(n.Why, "pkg/certs/") }

// checkCertManagerRBAC: the roles bound to the operator in the build grant
// exactly operatorNeeds less the self-managed certificates' rows: no
// Secret, and no update of the webhook configurations or the CRD.
func checkCertManagerRBAC(t *testing.T, ns string, objs built) {
	t.Helper()
	var needs []need
	for _, n := range operatorNeeds {
		if !selfManagedCerts(n) {
			needs = append(needs, n)
		}
	}
	if len(needs) == len(operatorNeeds) {
		t.Fatalf("operatorNeeds has no row of pkg/certs: selfManagedCerts no longer finds them")
	}
	want, err := expandNeeds(needs)
	if err != nil {
		t.Fatal(err)
	}
	sa := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: operatorSA, Namespace: ns}
	got := map[grant]bool{}
	for key, u := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		s := cluster
		switch u.GetKind() {
		case "RoleBinding":
			b := get[rbacv1.RoleBinding](t, objs, key)
			subjects, ref, s = b.Subjects, b.RoleRef, operatorNamespace
			if b.Namespace != ns {
				t.Errorf("%s: the operator's RoleBindings belong in %s", key, ns)
			}
		case "ClusterRoleBinding":
			b := get[rbacv1.ClusterRoleBinding](t, objs, key)
			subjects, ref = b.Subjects, b.RoleRef
		default:
			continue
		}
		if !slices.Contains(subjects, sa) {
			continue
		}
		var rules []rbacv1.PolicyRule
		if ref.Kind == "Role" {
			rules = get[rbacv1.Role](t, objs, objectKey("Role", ns, ref.Name)).Rules
		} else {
			rules = get[rbacv1.ClusterRole](t, objs, objectKey("ClusterRole", "", ref.Name)).Rules
		}
		for _, g := range expand(s, rules) {
			got[g] = true
		}
	}
	for _, g := range sortedKeys(want) {
		if !got[g] {
			t.Errorf("missing grant with manifests/certmanager: %s (%s)", g, want[g])
		}
	}
	for _, g := range sortedKeys(got) {
		if _, ok := want[g]; !ok {
			t.Errorf("extra grant with manifests/certmanager: %s; the operator on mounted certificates does not need it", g)
		}
	}
}
