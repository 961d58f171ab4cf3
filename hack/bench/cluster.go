package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller/webapp"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/controlplane"
)

// operatorNamespace holds the operators' own objects (the directory
// ConfigMaps) and the failover Leases.
const operatorNamespace = "handroll-system"

// cluster is the bench's own access to the API server: a client with limits
// far above the contenders', so that creating and cleaning up is never what
// is measured.
type cluster struct {
	kube   kubernetes.Interface
	client clientset.Interface
	// apiServerEvents are the writes of each event the API server wrote
	// itself, seen so far; kept by UID because the TTL deletes them.
	apiServerEvents map[types.UID]float64
	// controllers: kube-controller-manager, the scheduler and kwok run, so
	// Deployments have pods, and a namespace takes pods only once its
	// default ServiceAccount is there.
	controllers bool
	// webAppEvents are the writes of each event regarding a WebApp seen so
	// far, kept by UID because the TTL deletes them.
	webAppEvents map[types.UID]float64
	// cp is the control plane: its kube-apiserver and etcd are processes
	// of this run, whose CPU time each converge reads.
	cp *controlplane.ControlPlane
}

// serverCPU is the CPU time (utime + stime) kube-apiserver and etcd have
// used since they started.
func (c *cluster) serverCPU() (apiServer, etcd float64, err error) {
	if apiServer, err = c.componentCPU("kube-apiserver"); err != nil {
		return 0, 0, err
	}
	etcd, err = c.componentCPU("etcd")
	return apiServer, etcd, err
}

func (c *cluster) componentCPU(name string) (float64, error) {
	i := slices.IndexFunc(c.cp.Processes, func(p *controlplane.Process) bool { return p.Name == name })
	if i < 0 {
		return 0, fmt.Errorf("the control plane runs no %s", name)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cp.Processes[i].PID))
	if err != nil {
		return 0, fmt.Errorf("%s's CPU time: %w", name, err)
	}
	return parseCPUSeconds(string(stat))
}

// parallel is how many requests the bench keeps in flight.
const parallel = 16

// forEach calls fn for 0..n-1 with parallel goroutines and returns the
// errors joined.
func forEach(n int, fn func(i int) error) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	next := make(chan int)
	for range min(parallel, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

func (c *cluster) createNamespaces(ctx context.Context, names []string) error {
	return forEach(len(names), func(i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		if err != nil || !c.controllers {
			return err
		}
		// Else the ReplicaSet controller's first pods are refused, and its
		// back-off, not the contender, would set the time to Ready.
		return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := c.kube.CoreV1().ServiceAccounts(names[i]).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
	})
}

// podsRunning waits, where the controllers run, until namespaces hold want
// running pods, so that a measurement does not share the machine with
// their start.
func (c *cluster) podsRunning(ctx context.Context, namespaces []string, want int) error {
	if !c.controllers {
		return nil
	}
	running := 0
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		running = 0
		for _, ns := range namespaces {
			pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
			if err != nil {
				return false, nil //nolint:nilerr // polled again until the timeout
			}
			running += len(pods.Items)
		}
		return running >= want, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d pods running: %w", running, want, err)
	}
	return nil
}

// podsGone waits until namespaces hold no pod, so that the garbage
// collector's and kwok's work of one measurement is not charged to the
// next.
func (c *cluster) podsGone(ctx context.Context, namespaces []string) error {
	if !c.controllers {
		return nil
	}
	return forEach(len(namespaces), func(i int) error {
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			pods, err := c.kube.CoreV1().Pods(namespaces[i]).List(ctx, metav1.ListOptions{Limit: 1})
			return err == nil && len(pods.Items) == 0, nil
		})
		if err != nil {
			return fmt.Errorf("pods left in %s: %w", namespaces[i], err)
		}
		return nil
	})
}

// appName is the i-th WebApp's name.
func appName(i int) string { return fmt.Sprintf("app-%05d", i) }

// newWebApp is the i-th WebApp of a run: every other one has spec.config,
// so that half of them own a ConfigMap as well as a Deployment and a
// Service.
func newWebApp(namespace string, i int) *handrollv1.WebApp {
	w := &handrollv1.WebApp{
		ObjectMeta: metav1.ObjectMeta{Name: appName(i), Namespace: namespace},
		Spec: handrollv1.WebAppSpec{
			Image:    "nginx:1.27",
			Replicas: ptr.To[int32](1),
		},
	}
	if i%2 == 0 {
		w.Spec.Config = map[string]string{"app.yaml": fmt.Sprintf("greeting: hello from %s\n", w.Name)}
	}
	return w
}

// createWebApps creates n WebApps spread evenly over namespaces.
func (c *cluster) createWebApps(ctx context.Context, namespaces []string, n int) error {
	return forEach(n, func(i int) error {
		_, err := c.client.HandrollV1().WebApps(namespaces[i%len(namespaces)]).Create(ctx, newWebApp(namespaces[i%len(namespaces)], i), metav1.CreateOptions{})
		return err
	})
}

// webAppUIDs are the uids of the WebApps in namespaces, by key.
func (c *cluster) webAppUIDs(ctx context.Context, namespaces []string) (map[string]types.UID, error) {
	out := map[string]types.UID{}
	for _, ns := range namespaces {
		list, err := c.client.HandrollV1().WebApps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, w := range list.Items {
			out[ns+"/"+w.Name] = w.UID
		}
	}
	return out, nil
}

// wipe removes from namespaces every WebApp (dropping any finalizer a
// stopped contender left, such as the first version's directory finalizer)
// and every child, and removes the directory ConfigMaps, so that the next
// contender's cluster-wide caches start from the same empty cluster. The
// bench deletes the children itself, as a cluster may run no garbage
// collector, and, where the controllers run, what they made for them too.
// Events are left to the API server's TTL: no contender watches them, and
// deleting them would double a wipe's time.
func (c *cluster) wipe(ctx context.Context, namespaces []string) error {
	unfinalize := []byte(`{"metadata":{"finalizers":null}}`)
	all := metav1.ListOptions{}
	err := forEach(len(namespaces), func(i int) error {
		webapps := c.client.HandrollV1().WebApps(namespaces[i])
		list, err := webapps.List(ctx, all)
		if err != nil {
			return err
		}
		var errs []error
		for _, w := range list.Items {
			if len(w.Finalizers) > 0 {
				_, err := webapps.Patch(ctx, w.Name, types.MergePatchType, unfinalize, metav1.PatchOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	})
	// A DeleteCollection deletes one object after another: one call per
	// namespace and kind, all at once.
	kinds := []func(ns string) error{
		func(ns string) error {
			return c.client.HandrollV1().WebApps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		},
		func(ns string) error {
			return c.kube.AppsV1().Deployments(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		},
		func(ns string) error {
			return c.kube.CoreV1().ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		},
		func(ns string) error { return c.deleteServices(ctx, ns) },
	}
	err = errors.Join(err, forEach(len(namespaces)*len(kinds), func(i int) error {
		return untilDone(ctx, func() error { return kinds[i%len(kinds)](namespaces[i/len(kinds)]) })
	}))
	if err != nil {
		return fmt.Errorf("cleaning up: %w", err)
	}
	if err := c.deleteClusterMade(ctx, namespaces); err != nil {
		return fmt.Errorf("cleaning up: %w", err)
	}
	// The directory may be split into parts: every one carries its labels.
	err = c.kube.CoreV1().ConfigMaps(operatorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: directorySelector})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the directory ConfigMaps: %w", err)
	}
	return c.podsGone(ctx, namespaces)
}

// deleteClusterMade deletes, where the controllers run, what they made
// for the children: the Deployments' ReplicaSets and pods. The garbage
// collector would remove them one owner after another, and each pod would
// then wait for kwok to confirm its end; deleted here, the ReplicaSets
// before their pods so that none makes a pod again and the pods without
// grace, a wipe takes less than half the time.
func (c *cluster) deleteClusterMade(ctx context.Context, namespaces []string) error {
	if !c.controllers {
		return nil
	}
	all, now := metav1.ListOptions{}, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
	return forEach(len(namespaces), func(i int) error {
		ns := namespaces[i]
		if err := untilDone(ctx, func() error {
			return c.kube.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, all)
		}); err != nil {
			return err
		}
		return untilDone(ctx, func() error { return c.kube.CoreV1().Pods(ns).DeleteCollection(ctx, now, all) })
	})
}

// untilDone calls del again, up to deleteTries times, while it fails for
// want of time: a DeleteCollection of a thousand WebApps outlasts the API
// server's 60 s request timeout, which answers a timeout or resets the
// HTTP/2 stream, and the server goes on deleting; each call deletes what
// is left. A refusal (any other answer of the API server) is returned.
func untilDone(ctx context.Context, del func() error) error {
	for try := 1; ; try++ {
		err := del()
		var status apierrors.APIStatus
		refused := errors.As(err, &status) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err)
		if err == nil || refused || try == deleteTries || ctx.Err() != nil {
			return err
		}
	}
}

const deleteTries = 10

// directorySelector selects every part of the directory: the labels of
// pkg/controller/webapp's directoryLabels.
var directorySelector = labels.SelectorFromSet(labels.Set{
	webapp.LabelManagedBy: webapp.ManagedBy,
	webapp.LabelName:      "webapp-directory",
}).String()

// deleteServices deletes the Services of ns, in parallel: client-go's
// typed Service client has no DeleteCollection.
func (c *cluster) deleteServices(ctx context.Context, ns string) error {
	services := c.kube.CoreV1().Services(ns)
	list, err := services.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	return forEach(len(list.Items), func(i int) error {
		if err := services.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		return nil
	})
}

// eventWrites is the API server's count of writes to events, of both
// groups (core and events.k8s.io), since it started, less the events the
// API server wrote itself. A contender's own counter,
// rest_client_requests_total, has only method, code and host, so cannot
// tell an event from a child; one contender runs at a time and the bench
// writes no events, so the delta over a measurement is the contender's.
//
// Where the cluster's controllers run, they write events too (a
// Deployment scaled, a pod created, scheduled), so the count is then of the
// events regarding a WebApp, which every contender's are and theirs never.
func (c *cluster) eventWrites(ctx context.Context) (float64, error) {
	if c.controllers {
		return c.webAppEventWrites(ctx)
	}
	// Listed before the scrape: one written in between is subtracted at
	// the next call, not counted twice.
	for _, rc := range apiServerEventReporters {
		list, err := c.kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "reportingComponent=" + rc})
		if err != nil {
			return 0, fmt.Errorf("listing the API server's own events: %w", err)
		}
		for _, e := range list.Items {
			c.apiServerEvents[e.UID] = writesOf(&e)
		}
	}
	data, err := c.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").SetHeader("Accept", "text/plain").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("scraping the API server: %w", err)
	}
	n, err := eventWritesFrom(bytes.NewReader(data))
	for _, w := range c.apiServerEvents {
		n -= w
	}
	return n, err
}

// webAppEventWrites is the writes of every event regarding a WebApp
// written since the API server started.
func (c *cluster) webAppEventWrites(ctx context.Context) (float64, error) {
	if c.webAppEvents == nil {
		c.webAppEvents = map[types.UID]float64{}
	}
	list, err := c.kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=WebApp"})
	if err != nil {
		return 0, fmt.Errorf("listing the events regarding WebApps: %w", err)
	}
	for _, e := range list.Items {
		c.webAppEvents[e.UID] = writesOf(&e)
	}
	n := 0.0
	for _, w := range c.webAppEvents {
		n += w
	}
	return n, nil
}

// writesOf is how many writes made e: its create, then one PATCH per
// repeat (series.count counts from 2, a core event's count from 1).
func writesOf(e *corev1.Event) float64 {
	switch {
	case e.Series != nil && e.Series.Count > 1:
		return float64(e.Series.Count)
	case e.Count > 1:
		return float64(e.Count)
	}
	return 1
}

// apiServerEventReporters are the API server's own controllers that write
// events: the repair loops of the Service IP and port allocators, which now
// and then find a bench Service created between their two reads
// (ClusterIPNotAllocated) or an IPAddress left behind by one deleted
// (IPAddressNotAllocated).
var apiServerEventReporters = []string{"ipallocator-repair-controller", "portallocator-repair-controller"}

// eventWritesFrom sums apiserver_request_total over resource="events" and
// the write verbs (APPLY is a server-side-apply PATCH).
func eventWritesFrom(r io.Reader) (float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return 0, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	family, ok := families["apiserver_request_total"]
	if !ok {
		return 0, errors.New("the API server's metrics have no apiserver_request_total")
	}
	var n float64
	for _, m := range family.GetMetric() {
		var resource, verb string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "resource":
				resource = l.GetValue()
			case "verb":
				verb = l.GetValue()
			}
		}
		if resource == "events" && slices.Contains([]string{"POST", "PUT", "PATCH", "APPLY"}, verb) {
			n += m.GetCounter().GetValue()
		}
	}
	return n, nil
}

// Unrelated objects: what a real cluster holds besides the WebApps, in
// namespaces of their own (outside namespacePrefix, so the tracker ignores
// them). The ConfigMaps are big, so that caching them whole shows.
const (
	unrelatedNamespaces     = 20
	unrelatedConfigMapBytes = 64 << 10
	unrelatedPrefix         = "unrelated-"
)

func unrelatedNamespaceNames(m int) []string {
	out := make([]string, min(unrelatedNamespaces, m))
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", unrelatedPrefix, i)
	}
	return out
}

// createUnrelated creates m ConfigMaps, m Deployments and m Services spread
// over namespaces, labelled as nobody's. The ConfigMaps are made as most
// users make theirs, with kubectl apply, so each also carries the
// last-applied annotation: a second copy of its data, in every list and
// watch event of it, which an operator must not keep.
func (c *cluster) createUnrelated(ctx context.Context, namespaces []string, m int) error {
	if err := c.applyUnrelatedConfigMaps(ctx, namespaces, m); err != nil {
		return err
	}
	return forEach(2*m, func(k int) error {
		meta := unrelatedMeta(namespaces, k/2)
		selector := map[string]string{"app.kubernetes.io/name": meta.Name}
		var err error
		switch k % 2 {
		case 0:
			_, err = c.kube.AppsV1().Deployments(meta.Namespace).Create(ctx, &appsv1.Deployment{
				ObjectMeta: meta,
				Spec: appsv1.DeploymentSpec{
					Replicas: ptr.To[int32](1),
					Selector: &metav1.LabelSelector{MatchLabels: selector},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: selector},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
					},
				},
			}, metav1.CreateOptions{})
		case 1:
			_, err = c.kube.CoreV1().Services(meta.Namespace).Create(ctx, &corev1.Service{
				ObjectMeta: meta,
				Spec:       corev1.ServiceSpec{Selector: selector, Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{})
		}
		return err
	})
}

// lastLines is the last n lines of out, for an error message.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// unrelatedMeta is the metadata of the i-th unrelated object of each kind.
func unrelatedMeta(namespaces []string, i int) metav1.ObjectMeta {
	name := fmt.Sprintf("other-%05d", i)
	return metav1.ObjectMeta{Name: name, Namespace: namespaces[i%len(namespaces)],
		Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "unrelated"}}
}

// applyUnrelatedConfigMaps writes the m unrelated ConfigMaps, a List per
// namespace, and has the control plane's kubectl apply each file.
func (c *cluster) applyUnrelatedConfigMaps(ctx context.Context, namespaces []string, m int) error {
	dir, err := os.MkdirTemp("", "handroll-bench-unrelated-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	filler := strings.Repeat("0123456789abcdef", unrelatedConfigMapBytes/16)
	lists := make([]corev1.List, len(namespaces))
	for i := range m {
		meta := unrelatedMeta(namespaces, i)
		raw, err := json.Marshal(&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: meta, Data: map[string]string{"blob": filler}})
		if err != nil {
			return err
		}
		l := &lists[i%len(namespaces)]
		l.Items = append(l.Items, runtime.RawExtension{Raw: raw})
	}
	return forEach(len(namespaces), func(i int) error {
		lists[i].TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "List"}
		body, err := json.Marshal(&lists[i])
		if err != nil {
			return err
		}
		path := filepath.Join(dir, namespaces[i]+".json")
		if err := os.WriteFile(path, body, 0o600); err != nil {
			return err
		}
		out, err := exec.CommandContext(ctx, filepath.Join(c.cp.BinDir, "kubectl"), "--kubeconfig", c.cp.Kubeconfig, "apply", "-f", path).CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl apply of %s's unrelated ConfigMaps: %w: %s", namespaces[i], err, lastLines(out, 5))
		}
		return nil
	})
}

// setReplicas changes one WebApp's spec.replicas and returns the generation
// the change made.
func (c *cluster) setReplicas(ctx context.Context, namespace, name string, replicas int32) (int64, error) {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	w, err := c.client.HandrollV1().WebApps(namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return 0, err
	}
	return w.Generation, nil
}
