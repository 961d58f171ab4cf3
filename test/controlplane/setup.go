package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/test/budget"
)

// kwokNodeAnnotation marks the nodes kwok plays; kwok is told to manage only
// those, so a real node in the same cluster would be left alone.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// afterStart installs CRDs and registers fake nodes.
func (cp *ControlPlane) afterStart(ctx context.Context, opts Options) error {
	for _, dir := range opts.CRDDirs {
		if err := InstallCRDs(ctx, cp, dir); err != nil {
			return err
		}
	}
	if opts.Nodes > 0 {
		if err := cp.addNodes(ctx, opts.Nodes); err != nil {
			return err
		}
	}
	return nil
}

// InstallCRDs creates (or updates) every CustomResourceDefinition in the YAML
// files of dir and waits until each is Established, so that the caller can
// create its objects at once.
func InstallCRDs(ctx context.Context, cp *ControlPlane, dir string) error {
	client, err := apiextensionsclient.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	crds, err := readCRDs(dir)
	if err != nil {
		return err
	}
	for _, crd := range crds {
		existing, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
		case err == nil:
			crd.ResourceVersion = existing.ResourceVersion
			_, err = client.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
		cp.logf("installed CRD %s", crd.Name)
	}
	for _, crd := range crds {
		err := budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.NamesAccepted && c.Status == apiextensionsv1.ConditionFalse {
					return false, fmt.Errorf("names not accepted: %s", c.Message)
				}
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be Established: %w", crd.Name, err)
		}
	}
	return nil
}

func readCRDs(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var crd apiextensionsv1.CustomResourceDefinition
			if err := dec.Decode(&crd); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if crd.Kind != "CustomResourceDefinition" {
				continue // kustomization.yaml and other files
			}
			crds = append(crds, &crd)
		}
	}
	if len(crds) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions in %s", dir)
	}
	return crds, nil
}

// addNodes registers n fake nodes for kwok and waits until each is Ready.
func (cp *ControlPlane) addNodes(ctx context.Context, n int) error {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	for i := range n {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        fmt.Sprintf("kwok-node-%d", i),
				Annotations: map[string]string{kwokNodeAnnotation: "fake"},
				Labels: map[string]string{
					"type":                   "kwok",
					"kubernetes.io/hostname": fmt.Sprintf("kwok-node-%d", i),
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
				},
			},
			Status: corev1.NodeStatus{
				Allocatable: nodeResources(),
				Capacity:    nodeResources(),
			},
		}
		if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering fake node %s: %w", node.Name, err)
		}
	}
	err = budget.Poll(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, nil //nolint:nilerr // not yet: poll again until the timeout
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes not Ready (is kwok running?): %w\n%s", err, cp.Logs(20))
	}
	cp.logf("%d fake node(s) Ready", n)
	return nil
}

func nodeResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
}

// CreateNamespace creates a namespace named after prefix with a random
// suffix. When the controllers run, it waits for the namespace's default
// ServiceAccount, without which the API server refuses pods.
func (cp *ControlPlane) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return "", err
	}
	// Test names hold '/' and '_'; a namespace name is a DNS label.
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, strings.ToLower(prefix))
	if len(name) > 50 {
		name = name[:50]
	}
	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: strings.Trim(name, "-") + "-"},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	if cp.has("kube-controller-manager") {
		err = budget.Poll(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := client.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return "", fmt.Errorf("namespace %s has no default ServiceAccount: %w", ns.Name, err)
		}
	}
	return ns.Name, nil
}

func (cp *ControlPlane) has(name string) bool {
	for _, p := range cp.Processes {
		if p.Name == name {
			return true
		}
	}
	return false
}
