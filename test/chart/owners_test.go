package chart

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsv1client "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/handroll/handroll/test/controlplane"
)

// TestInstallAndDeployFieldOwners: whose fields make install and make
// deploy take (the Makefile says why, beside each target), on a real
// kube-apiserver with its controllers and a kwok node, which reports the
// operator's pods ready without running them. make install takes none: a
// CA bundle the operator wrote stays, and a CRD a deploy moved is refused.
// make deploy takes the CRD's conversion from make install, and the
// replicas and image from kubectl, back to what its manifests and IMG say.
// make undeploy then removes all of it.
func TestInstallAndDeployFieldOwners(t *testing.T) {
	kubectl := kubectlPath(t)
	cp := controlplane.StartForTest(t, controlplane.Options{Nodes: 1})
	crds := apiextensionsclient.NewForConfigOrDie(cp.Config).ApiextensionsV1().CustomResourceDefinitions()
	kube := cp.KubeClient(t)
	mk := func(target string, vars ...string) (string, error) {
		out, err := run(t, nil, "make", append([]string{"--no-print-directory", target, "KUBECONFIG=" + cp.Kubeconfig, "KUBECTL=" + kubectl}, vars...)...)
		return string(out), err
	}
	conversionNamespace := func() string {
		t.Helper()
		crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return crd.Spec.Conversion.Webhook.ClientConfig.Service.Namespace
	}

	checkInstallKeepsOperatorsCABundle(t, mk, crds)

	// make deploy of an overlay in another namespace moves the CRD's
	// conversion there, out of make install's hands.
	const ns = "my-operators"
	dir := overlay(t, ns, "", []string{"manifests/default"}, nil)
	if out, err := mk("deploy", "KUSTOMIZE_DIR="+dir, "IMG=registry.invalid/handroll:first"); err != nil {
		t.Fatalf("make deploy after make install: %v\n%s", err, out)
	}
	if got := conversionNamespace(); got != ns {
		t.Errorf("after make deploy in %s, the CRD converts in %s", ns, got)
	}

	// make install now would point the conversion where no operator runs.
	out, err := mk("install")
	if err == nil || !strings.Contains(err.Error(), "conflict") || !strings.Contains(err.Error(), "handroll-deploy") {
		t.Errorf("make install over make deploy's CRD: %v\n%s\nwant it refused, naming handroll-deploy", err, out)
	}
	if got := conversionNamespace(); got != ns {
		t.Errorf("make install moved the CRD's conversion from make deploy's %s to %s", ns, got)
	}

	// Scaled to 0 (by hand, or by an uninstall that stopped) and another
	// image set by hand: make deploy runs IMG with the manifests' replicas.
	const second = "registry.invalid/handroll:second"
	checkDeployTakesReplicasAndImage(t, mk, cp, kubectl, kube, ns, dir, second)

	if out, err := mk("undeploy", "KUSTOMIZE_DIR="+dir, "IMG="+second, "UNDEPLOY_DELETE_WEBAPPS=true", "UNDEPLOY_WEBAPP_TIMEOUT=60"); err != nil {
		t.Fatalf("make undeploy: %v\n%s", err, out)
	}
	if _, err := crds.Get(t.Context(), crdName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after make undeploy UNDEPLOY_DELETE_WEBAPPS=true, the CRD: %v", err)
	}
	waitFor(t, "namespace "+ns+" to go", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// checkInstallKeepsOperatorsCABundle runs make install, writes a CA bundle
// as the operator does, and checks that make install again keeps it.
func checkInstallKeepsOperatorsCABundle(t *testing.T, mk func(target string, vars ...string) (string, error), crds apiextensionsv1client.CustomResourceDefinitionInterface) {
	t.Helper()
	if out, err := mk("install"); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	// The operator writes the CRD's CA bundle with an update (pkg/certs);
	// the manifests leave it out, so make install does not contend for it.
	crd, err := crds.Get(t.Context(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := base64.StdEncoding.DecodeString(caBundlePEM(t))
	if err != nil {
		t.Fatal(err)
	}
	crd.Spec.Conversion.Webhook.ClientConfig.CABundle = bundle
	if _, err := crds.Update(t.Context(), crd, metav1.UpdateOptions{FieldManager: "handroll"}); err != nil {
		t.Fatal(err)
	}
	if out, err := mk("install"); err != nil {
		t.Fatalf("make install over the operator's CA bundle: %v\n%s", err, out)
	}
	if crd, err = crds.Get(t.Context(), crdName, metav1.GetOptions{}); err != nil || len(crd.Spec.Conversion.Webhook.ClientConfig.CABundle) == 0 {
		t.Errorf("make install removed the operator's CA bundle (%v)", err)
	}
}

// checkDeployTakesReplicasAndImage sets the operator's replicas and image
// with kubectl, and checks that make deploy IMG=second takes them back.
func checkDeployTakesReplicasAndImage(t *testing.T, mk func(target string, vars ...string) (string, error), cp *controlplane.ControlPlane, kubectl string, kube kubernetes.Interface, ns, dir, second string) {
	t.Helper()
	deployments := kube.AppsV1().Deployments(ns)
	for _, args := range [][]string{
		{"scale", "deployment/handroll", "--replicas=0"},
		{"set", "image", "deployment/handroll", "manager=registry.invalid/handroll:by-hand"},
	} {
		if out, err := run(t, nil, kubectl, append([]string{"--kubeconfig", cp.Kubeconfig, "-n", ns}, args...)...); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	if out, err := mk("deploy", "KUSTOMIZE_DIR="+dir, "IMG="+second); err != nil {
		t.Fatalf("make deploy over kubectl's replicas and image: %v\n%s", err, out)
	}
	d, err := deployments.Get(t.Context(), "handroll", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(d.Spec.Replicas, 1); got != 2 {
		t.Errorf("after make deploy, %d replicas; want the manifests' 2", got)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != second {
		t.Errorf("after make deploy IMG=%s, the operator runs %s", second, got)
	}
}
