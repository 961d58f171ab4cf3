// Command cluster runs the local cluster behind `make cluster-up`,
// `make cluster-down` and `make cluster-status`: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok with fake nodes, built
// from pinned sources by hack/testbin.sh, and, where this machine can run
// containers, one real node (kubelet, containerd, kube-proxy), running in
// the background until brought down. `cluster leftovers` fails if a real
// node left anything behind on this machine.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/handroll/handroll/test/controlplane"
)

// operatorNamespace is where handroll runs and keeps its own objects.
const operatorNamespace = "handroll-system"

func main() {
	nodes := flag.Int("nodes", 2, "fake nodes to register with kwok (up)")
	realNode := flag.String("real-node", "auto", "start the real node "+controlplane.RealNodeName+": auto (where this machine can), true (fail where it cannot), false (up)")
	pause := flag.String("pause-image", "", "OCI archive of the sandbox image "+controlplane.PauseImage+" (up; default .local/image/pause.tar)")
	registry := flag.String("registry", "", "the registry binary (hack/image/cmd/registry) the real node pulls localhost/... images from (up; default .local/bin/registry)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: cluster [--nodes N] [--real-node auto|true|false] [--pause-image FILE] [--registry FILE] up|down|status|leftovers|registry\n")
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}

	root, err := controlplane.RepoRoot()
	if err != nil {
		fail(err)
	}
	l := layout{
		dir:        filepath.Join(root, ".local", "cluster"),
		state:      filepath.Join(root, ".local", "cluster", "state.json"),
		kubeconfig: filepath.Join(root, ".local", "kubeconfig"),
	}

	if *pause == "" {
		*pause = filepath.Join(root, ".local", "image", "pause.tar")
	}
	if *registry == "" {
		*registry = filepath.Join(root, ".local", "bin", "registry")
	}
	switch flag.Arg(0) {
	case "up":
		var real *controlplane.RealNodeOptions
		if real, err = wantRealNode(*realNode, *pause, *registry); err == nil {
			err = up(l, *nodes, real)
		}
	case "leftovers":
		err = leftovers(l)
	case "down":
		err = down(l)
	case "status":
		err = status(l)
	case "registry":
		err = printRegistry(l)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

type layout struct{ dir, state, kubeconfig string }

func fail(err error) {
	fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
	os.Exit(1)
}

// up starts the cluster unless one is already running and ready, in which
// case it only makes sure the namespace and kubeconfig are there.
func up(l layout, nodes int, real *controlplane.RealNodeOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	if cp, err := controlplane.Load(l.state); err == nil {
		_, down := cp.Running()
		if len(down) == 0 && cp.Ready(ctx) == nil {
			fmt.Printf("cluster: reusing the running local cluster (%s)\n", cp.Server)
			if real != nil && cp.Node == nil {
				fmt.Println("cluster: it has no real node; `make cluster-down cluster-up` starts one")
			}
			return prepare(ctx, cp, l)
		}
		fmt.Printf("cluster: the previous local cluster is not healthy (%s down); starting a new one\n", strings.Join(down, ", "))
		_ = cp.Stop()
		if err := os.RemoveAll(l.dir); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}

	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return err
	}
	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Dir:      l.dir,
		Nodes:    nodes,
		Detach:   true,
		RealNode: real,
		Progress: os.Stdout,
		// The sharded list and watch (alpha) that --shards uses, so that
		// each replica caches only its ranges (pkg/shard).
		APIServerArgs: []string{"--feature-gates=ShardedListAndWatch=true"},
	})
	if err != nil {
		// Start stopped what it started; the state saved so far is gone.
		_ = os.RemoveAll(l.dir)
		return err
	}
	if err := cp.Save(l.state); err != nil {
		_ = cp.Stop()
		return err
	}
	if err := prepare(ctx, cp, l); err != nil {
		return err
	}
	fmt.Printf("cluster: up in %s: %s\n", time.Since(began).Round(time.Second), cp.Server)
	return nil
}

// prepare creates the operator's namespace and writes the admin kubeconfig
// where users and `make run` look for it. It installs no CRD: whatever
// install path the user takes next (kubectl apply, the installer, helm,
// make install) owns the CRD, as on a cluster of their own; `make run`
// installs it for a local run.
func prepare(ctx context.Context, cp *controlplane.ControlPlane, l layout) error {
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	_, err = client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", operatorNamespace, err)
	}
	data, err := os.ReadFile(cp.Kubeconfig)
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.kubeconfig, data, 0o600); err != nil {
		return err
	}
	fmt.Printf("cluster: admin kubeconfig in %s\n", l.kubeconfig)
	return nil
}

func down(l layout) error {
	cp, err := controlplane.Load(l.state)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Println("cluster: no local cluster to stop")
		return nil
	}
	if err != nil {
		return err
	}
	if err := cp.Stop(); err != nil {
		return err
	}
	for _, path := range []string{l.dir, l.kubeconfig} {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	fmt.Println("cluster: stopped every component and removed its state")
	return nil
}

func status(l layout) error {
	cp, err := controlplane.Load(l.state)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Println("cluster: not running (make cluster-up starts it)")
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Printf("cluster: %s, state in %s\n", cp.Server, l.dir)
	for _, p := range cp.Processes {
		state := "running"
		if !p.Running() {
			state = "NOT RUNNING"
		}
		fmt.Printf("  %-24s pid %-8d %s  (log %s)\n", p.Name, p.PID, state, p.LogPath)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := cp.Ready(ctx); err != nil {
		fmt.Printf("  API server: not ready: %v\n", err)
		return nil
	}
	client, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("  API server: ready; %d node(s); kubeconfig %s\n", len(nodes.Items), l.kubeconfig)
	for _, n := range nodes.Items {
		kind := "fake (kwok)"
		if n.Name == controlplane.RealNodeName {
			kind = "real (kubelet, containerd, runc)"
		}
		ready := "NotReady"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = "Ready"
			}
		}
		fmt.Printf("  node %-10s %-9s %s\n", n.Name, ready, kind)
	}
	if cp.Node == nil {
		fmt.Println("  no real node (containers only pretend to run)")
	}
	return nil
}

// wantRealNode decides whether `up` starts the real node: with "auto",
// where this machine has what it needs, and says why not otherwise.
func wantRealNode(mode, pause, registry string) (*controlplane.RealNodeOptions, error) {
	if mode == "false" {
		return nil, nil
	}
	if mode != "auto" && mode != "true" {
		return nil, fmt.Errorf("--real-node is auto, true or false, not %q", mode)
	}
	missing := controlplane.RealNodeMissing()
	if _, err := os.Stat(pause); err != nil {
		missing = append(missing, "the sandbox image "+pause+" (make image-pause)")
	}
	if _, err := os.Stat(registry); err != nil {
		missing = append(missing, "the registry "+registry+" (make node-prerequisites)")
	}
	if len(missing) == 0 {
		return &controlplane.RealNodeOptions{PauseArchive: pause, Registry: registry}, nil
	}
	why := strings.Join(missing, ", ")
	if mode == "true" {
		return nil, fmt.Errorf("cannot start the real node %s: this machine lacks %s (hack/install-node-packages.sh installs the packages)", controlplane.RealNodeName, why)
	}
	fmt.Printf("cluster: no real node: this machine lacks %s; starting the kwok-only cluster (pods only pretend to run)\n", why)
	return nil, nil
}

// printRegistry prints the address of the real node's registry, where
// `make deploy` pushes the images the node pulls as localhost/NAME:TAG.
func printRegistry(l layout) error {
	cp, err := controlplane.Load(l.state)
	if err != nil {
		return fmt.Errorf("no local cluster (make cluster-up): %w", err)
	}
	if cp.Node == nil || cp.Node.Registry == "" {
		return errors.New("the local cluster has no real node with a registry; `make cluster-down cluster-up REAL_NODE=true` starts one")
	}
	if _, down := cp.Running(); slices.Contains(down, "registry") {
		return errors.New("the local cluster's registry is not running; `make cluster-down cluster-up REAL_NODE=true` starts a new cluster")
	}
	fmt.Println(cp.Node.Registry)
	return nil
}

// leftovers fails if a real node left a process, mount, cgroup, rule,
// route, bridge or directory on this machine, or the cluster's state.
func leftovers(l layout) error {
	left := controlplane.NodeLeftovers(filepath.Join(l.dir, "node"))
	if _, err := os.Stat(l.dir); err == nil {
		left = append(left, "directory "+l.dir)
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind on this machine:\n  %s", strings.Join(left, "\n  "))
	}
	fmt.Println("cluster: nothing of a local cluster is left on this machine")
	return nil
}
