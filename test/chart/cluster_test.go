package chart

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
)

const crdName = "webapps.handroll.dev"

// startAPIServer starts etcd and kube-apiserver, no controllers and no
// nodes: every object is created and checked by the API server, no pod
// runs.
func startAPIServer(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no control plane")
	}
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

// TestAgainstAPIServer runs make install and make uninstall on a fresh
// cluster, then helm install, upgrade and uninstall of the chart into a
// namespace of the user's choice, against a real kube-apiserver.
func TestAgainstAPIServer(t *testing.T) {
	helm, kubectl := helmPath(t), kubectlPath(t)
	cp := startAPIServer(t)
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	kube := cp.KubeClient(t)

	t.Run("make install and uninstall", func(t *testing.T) {
		checkMakeInstallAndUninstall(t, cp, kubectl, crds, kube)
	})

	t.Run("helm install, upgrade, uninstall", func(t *testing.T) {
		const ns = "platform-operators"
		helmRun := func(args ...string) string {
			t.Helper()
			out, err := run(t, nil, helm, append(args, "--kubeconfig", cp.Kubeconfig, "--namespace", ns)...)
			if err != nil {
				t.Fatal(err)
			}
			return string(out)
		}
		dyn := dynamic.NewForConfigOrDie(cp.Config)
		checkHelmInstallUpgradeUninstall(t, helmRun, crds, kube, dyn, ns)

		// The optional parts, each accepted by the API server: the
		// Prometheus Operator's and cert-manager's kinds from stand-in CRDs
		// (their schemas are theirs to check), the rest for real, such as a
		// caBundle the API server parses.
		installStandInCRDs(t, crds, "monitoring.coreos.com", "ServiceMonitor", "PrometheusRule")
		installStandInCRDs(t, crds, "cert-manager.io", "Certificate", "Issuer")
		checkOptionalPartsInstall(t, helmRun, kube, dyn, ns)

		// The kept CRD is adopted by the next install of the same release;
		// with crd.keep=false, uninstall deletes it.
		helmRun("install", "handroll", "charts/handroll", "--set", "crd.keep=false")
		helmRun("uninstall", "handroll", "--no-hooks")
		waitFor(t, "the CRD deleted", func(ctx context.Context) (bool, error) {
			_, err := crds.Get(ctx, crdName, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
}

// checkMakeInstallAndUninstall checks that make install applies the CRD
// alone, Established, and that make uninstall deletes it and its WebApps,
// saying so.
func checkMakeInstallAndUninstall(t *testing.T, cp *controlplane.ControlPlane, kubectl string, crds apiextensionsv1client.CustomResourceDefinitionInterface, kube kubernetes.Interface) {
	t.Helper()
	mk := func(target string, vars ...string) (string, error) {
		out, err := run(t, nil, "make", append([]string{"--no-print-directory", target, "KUBECONFIG=" + cp.Kubeconfig, "KUBECTL=" + kubectl}, vars...)...)
		return string(out), err
	}
	if _, err := mk("install"); err != nil {
		t.Fatal(err)
	}
	crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after make install: %v", err)
	}
	if !established(crd) {
		t.Errorf("make install returned before %s was Established", crdName)
	}
	// The CRD alone: nothing namespaced, no webhook configuration.
	if ns, err := kube.CoreV1().Namespaces().Get(t.Context(), defaultNamespace, metav1.GetOptions{}); err == nil {
		t.Errorf("make install created namespace %s", ns.Name)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), "handroll", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("make install: the webhook configuration: %v; want none", err)
	}
	if _, err := mk("install"); err != nil {
		t.Errorf("make install a second time: %v", err)
	}

	// A WebApp, which uninstall says it deletes with the CRD.
	webapps := dynamic.NewForConfigOrDie(cp.Config).Resource(schema.GroupVersionResource{Group: "handroll.dev", Version: "v1", Resource: "webapps"})
	wa := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "handroll.dev/v1", "kind": "WebApp",
		"metadata": map[string]any{"name": "left-behind", "namespace": "default"},
		"spec":     map[string]any{"image": "registry.invalid/app:1"},
	}}
	if _, err := webapps.Namespace("default").Create(t.Context(), wa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := mk("uninstall")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "deletes the cluster's 1 WebApp(s)") {
		t.Errorf("make uninstall did not say that it deletes the WebApp:\n%s", out)
	}
	if _, err := crds.Get(t.Context(), crdName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after make uninstall (%s): the CRD: %v", out, err)
	}
	if _, err := mk("uninstall"); err == nil || !strings.Contains(err.Error(), "NotFound") {
		t.Errorf("make uninstall without the CRD: %v; want kubectl's NotFound, as kubebuilder's unless ignore-not-found=true", err)
	}
	if _, err := mk("uninstall", "ignore-not-found=true"); err != nil {
		t.Errorf("make uninstall ignore-not-found=true without the CRD: %v", err)
	}
}

// checkHelmInstallUpgradeUninstall checks that helm install puts all the
// chart renders in ns, upgrade changes the split and the user roles, and
// uninstall removes all but the kept CRD.
func checkHelmInstallUpgradeUninstall(t *testing.T, helmRun func(args ...string) string, crds apiextensionsv1client.CustomResourceDefinitionInterface, kube kubernetes.Interface, dyn dynamic.Interface, ns string) {
	t.Helper()
	helmRun("install", "handroll", "charts/handroll", "--create-namespace", "--set", "networkPolicy.enable=true")
	crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace; got != ns {
		t.Errorf("the CRD's conversion Service is in %q, want %q", got, ns)
	}
	waitFor(t, "the CRD Established", func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, crdName, metav1.GetOptions{})
		return err == nil && established(crd), nil
	})
	// Everything the chart rendered is in the cluster, where it said.
	rendered := mustTemplate(t, ns, "--set", "networkPolicy.enable=true")
	checkPresent(t, kube, dyn, rendered, true)

	// A new split with no replica running, as the chart asks
	// (TestShardsChangeIsRefusedWhileReplicasRun).
	helmRun("upgrade", "handroll", "charts/handroll", "--set", "networkPolicy.enable=true,manager.replicas=0")
	helmRun("upgrade", "handroll", "charts/handroll", "--set", "networkPolicy.enable=true,manager.shards=3,rbacHelpers.enable=false")
	d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--shards=3") {
		t.Errorf("after helm upgrade --set manager.shards=3: args %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	if _, err := kube.RbacV1().ClusterRoles().Get(t.Context(), "webapp-admin", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after helm upgrade --set rbacHelpers.enable=false: webapp-admin: %v", err)
	}

	// No pod runs here, so the pre-delete hook's Job could not: its
	// command is TestUninstallCommand's, and test/real runs the hook.
	out := helmRun("uninstall", "handroll", "--no-hooks")
	checkPresent(t, kube, dyn, withoutKind(rendered, "CustomResourceDefinition"), false)
	if _, err := crds.Get(t.Context(), crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall (%s) removed the CRD, which crd.keep keeps: %v", strings.TrimSpace(out), err)
	}
}

// checkOptionalPartsInstall installs and uninstalls the chart with each
// set of optional parts, checking that all it renders is in the cluster.
func checkOptionalPartsInstall(t *testing.T, helmRun func(args ...string) string, kube kubernetes.Interface, dyn dynamic.Interface, ns string) {
	t.Helper()
	for _, set := range []string{
		"webhook.certSecret.name=my-webhook-tls,webhook.certSecret.caBundle=" + caBundlePEM(t) + ",prometheus.enable=true,metrics.secure=false,networkPolicy.enable=true",
		"certManager.enable=true,prometheus.enable=true,manager.replicas=1,manager.leaderElection.enable=false," + scraperValues(ns),
		"prometheus.enable=true," + scraperValues(ns),
	} {
		helmRun("install", "handroll", "charts/handroll", "--set", set)
		checkPresent(t, kube, dyn, mustTemplate(t, ns, "--set", set), true)
		helmRun("uninstall", "handroll", "--no-hooks")
	}

}

// installStandInCRDs creates namespaced v1 CRDs of group for kinds that
// keep any content, and waits until they are served.
func installStandInCRDs(t *testing.T, crds apiextensionsv1client.CustomResourceDefinitionInterface, group string, kinds ...string) {
	t.Helper()
	yes := true
	for _, kind := range kinds {
		plural := strings.ToLower(kind) + "s"
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural, ListKind: kind + "List", Singular: strings.ToLower(kind)},
				Scope: apiextensionsv1.NamespaceScoped,
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &yes,
					}},
				}},
			},
		}
		if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, crd.Name+" Established", func(ctx context.Context) (bool, error) {
			got, err := crds.Get(ctx, crd.Name, metav1.GetOptions{})
			return err == nil && established(got), nil
		})
	}
}

// caBundlePEM is a self-signed CA certificate, PEM, base64-encoded as a
// caBundle value is.
func caBundlePEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

func waitFor(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := budget.Poll(t.Context(), 200*time.Millisecond, time.Minute, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func withoutKind(objs objects, kind string) objects {
	out := objects{}
	for k, o := range objs {
		if o["kind"] != kind {
			out[k] = o
		}
	}
	return out
}

// checkPresent checks that each rendered object is in the cluster (want)
// or gone (!want), found through discovery by its apiVersion and kind.
// Hooks are not: helm makes them only when it runs them (the uninstall
// hook, on helm uninstall).
func checkPresent(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface, objs objects, want bool) {
	t.Helper()
	resources := map[string]string{} // "apiVersion Kind" -> resource
	lists, err := kube.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				resources[l.GroupVersion+" "+r.Kind] = r.Name
			}
		}
	}
	for _, k := range objs.keys() {
		o := objs[k]
		if dig(o, "metadata", "annotations", "helm.sh/hook") != nil {
			continue
		}
		apiVersion, kind := o["apiVersion"].(string), o["kind"].(string)
		res, ok := resources[apiVersion+" "+kind]
		if !ok {
			t.Errorf("%s: the API server serves no %s %s", k, apiVersion, kind)
			continue
		}
		gv, err := schema.ParseGroupVersion(apiVersion)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		ns, _ := dig(o, "metadata", "namespace").(string)
		name, _ := dig(o, "metadata", "name").(string)
		_, err = dyn.Resource(gv.WithResource(res)).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
		switch {
		case want && err != nil:
			t.Errorf("%s: %v", k, err)
		case !want && err == nil:
			t.Errorf("%s is still there after helm uninstall", k)
		case !want && !apierrors.IsNotFound(err):
			t.Errorf("%s: %v", k, err)
		}
	}
}
