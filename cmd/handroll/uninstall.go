package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/certs"
	"github.com/handroll/handroll/pkg/controller/webapp"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/shard"
)

// uninstallOptions are the flags of `handroll uninstall`.
type uninstallOptions struct {
	kubeconfig    string
	namespace     string
	deployment    string
	leaseName     string
	secretName    string
	deleteWebApps bool
	// forceFinalizers also removes other controllers' finalizers: their
	// clean-up is skipped, which only the user can decide.
	forceFinalizers bool
	timeout         time.Duration
}

// runUninstall is `handroll uninstall`: the steps of an uninstall that only
// the cluster can do, which the chart runs as its pre-delete hook (the
// image has no shell and no kubectl) and which need the operator still
// running:
//
//  1. with --delete-webapps only (by default every WebApp is kept, with
//     its children, for a later install to take over), every WebApp is
//     deleted while the operator runs, so that its
//     directory entry goes, in the foreground if it has children, so that
//     it goes only once the garbage collector has taken them (once the CRD
//     is gone, the garbage collector could no longer prove their owner
//     absent), concurrently, a page of the list at a time, all within
//     --timeout;
//     handroll's own legacy finalizer is removed, another controller's
//     never: a WebApp that one still holds is named, with its holder, and
//     the uninstall fails rather than skip that controller's clean-up;
//  2. the operator's Deployment is scaled to 0 and its pods are waited
//     for, so that nothing recreates what step 3 deletes;
//  3. what the operator made as it ran is deleted from its namespace: its
//     Leases, the directory's ConfigMaps, its self-managed certificate
//     Secret and the ConfigMap it publishes the CA in (never one it did not
//     make).
//
// helm then deletes the rest, as it installed it.
func runUninstall(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("handroll uninstall", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var o uninstallOptions
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "Path to a kubeconfig file. Empty: KUBECONFIG, then the in-cluster configuration, then ~/.kube/config.")
	fs.StringVar(&o.namespace, "operator-namespace", "", "Namespace of the operator and of what it made as it ran. Empty: the pod's own namespace.")
	fs.StringVar(&o.deployment, "deployment", "handroll", "The operator's Deployment in --operator-namespace, scaled to 0 before its objects are deleted; empty: none.")
	fs.StringVar(&o.leaseName, leader.FlagResourceName, leader.DefaultLeaseName, "The operator's --"+leader.FlagResourceName+": its Lease, and the prefix of its shard Leases.")
	fs.StringVar(&o.secretName, "webhook-secret-name", "handroll-webhook-tls", "The operator's --webhook-secret-name; deleted only if handroll made it.")
	fs.BoolVar(&o.deleteWebApps, "delete-webapps", false, "Delete every WebApp in the cluster first, and wait until they are gone. Without it every WebApp and its workloads are kept, unreconciled, for a later install to take over.")
	fs.BoolVar(&o.forceFinalizers, "force-finalizers", false, "Also remove other controllers' finalizers from the WebApps it deletes, skipping their clean-up (a backup's, a policy's). Only when you know it may be skipped.")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "How long to wait for the WebApps, then for the operator's pods, to go.")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "handroll uninstall removes the WebApps, then what the operator made as it ran; helm uninstall runs it first.\n\nUsage:\n  handroll uninstall [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "handroll uninstall: %v\n", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "handroll uninstall: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.timeout <= 0 {
		fmt.Fprintf(stderr, "handroll uninstall: --timeout must be positive, not %s\n", o.timeout)
		return 2
	}
	if o.namespace == "" {
		o.namespace = leader.DefaultNamespace()
	}
	ctx, stop := signalContext()
	defer stop()
	if err := uninstall(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "handroll uninstall: %v\n", err)
		return 1
	}
	return 0
}

func uninstall(ctx context.Context, o uninstallOptions, out io.Writer) error {
	cfg, _, err := loadConfig(o.kubeconfig, uninstallQPS, uninstallBurst, 30*time.Second)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hc, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.deleteWebApps {
		if err := deleteAllWebApps(ctx, hc, kube, o.forceFinalizers, o.timeout, out); err != nil {
			return err
		}
	} else if err := sayKept(ctx, hc, out); err != nil {
		return err
	}
	if o.deployment != "" {
		if err := scaleToZero(ctx, kube, o.namespace, o.deployment, o.timeout, out); err != nil {
			return err
		}
	}
	return deleteRuntimeObjects(ctx, kube, o, out)
}

// sayKept says in one line what an uninstall without --delete-webapps
// keeps.
func sayKept(ctx context.Context, hc versioned.Interface, out io.Writer) error {
	// One item is enough: the list's remainingItemCount counts the rest.
	list, err := hc.HandrollV1().WebApps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsNotFound(err):
		fmt.Fprintln(out, "uninstall: kept no WebApp: the cluster has no WebApp CRD")
		return nil
	case err != nil:
		return fmt.Errorf("listing the WebApps: %w", err)
	}
	n := int64(len(list.Items)) + ptr.Deref(list.RemainingItemCount, 0)
	fmt.Fprintf(out, "uninstall: kept %d WebApp(s) and their workloads, unreconciled until an install takes them over (--delete-webapps deletes them)\n", n)
	return nil
}

// deleteAllWebApps deletes every WebApp and waits until none is left,
// within timeout counted from its start. A WebApp that appears meanwhile
// (a GitOps tool putting it back) is deleted too; handroll's legacy
// finalizer is removed here, so that this works with no operator running
// as well, and every finalizer if force is set.
func deleteAllWebApps(ctx context.Context, hc versioned.Interface, kube kubernetes.Interface, force bool, timeout time.Duration, out io.Writer) error {
	sweep := webAppSweeper{client: hc, kube: kube, force: force, out: out}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var left []heldWebApp
	var lastErr, firstErr error
	passes, noCRD := 0, false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		now, err := sweep.pass(ctx)
		switch {
		case apierrors.IsNotFound(err):
			// No CRD, no WebApp: a second uninstall, crd.enable=false with
			// the CRD already removed, or the CRD went meanwhile, and
			// every WebApp with it.
			noCRD = passes == 0
			left, lastErr = nil, nil
			return true, nil
		case err == nil:
			if passes == 0 {
				fmt.Fprintf(out, "uninstall: deleting %d WebApp(s)\n", len(now))
			}
			passes++
			left, lastErr = now, nil
			return len(left) == 0, nil
		case passes == 0 && !cutShort(ctx):
			// Not one pass through: an error of the API server's is the
			// uninstall's.
			firstErr = err
			return false, err
		case !cutShort(ctx):
			// Retried until the timeout; left is the last pass that read.
			// A pass cut short by the timeout itself says nothing new.
			lastErr = err
		}
		return false, nil
	})
	switch {
	case noCRD:
		fmt.Fprintln(out, "uninstall: no WebApp CRD in the cluster: no WebApp to delete")
		return nil
	case err == nil:
		fmt.Fprintln(out, "uninstall: every WebApp is gone")
		return nil
	case firstErr != nil:
		return firstErr
	}
	var msg string
	if passes == 0 {
		msg = fmt.Sprintf("the WebApps were not all listed and deleted within %s", timeout)
	} else {
		msg = heldMessage(context.WithoutCancel(ctx), kube, left, timeout)
	}
	// The pass cut short by the timeout itself says nothing new.
	if lastErr != nil && !errors.Is(lastErr, context.DeadlineExceeded) && !errors.Is(lastErr, context.Canceled) {
		msg += "\nthe last attempt failed: " + lastErr.Error()
	}
	return errors.New(msg)
}

// cutShort reports whether ctx's deadline has come, even before ctx says
// so: client-go's rate limiter refuses a request that would end past the
// deadline with an error of its own, not context.DeadlineExceeded.
func cutShort(ctx context.Context) bool {
	deadline, ok := ctx.Deadline()
	return ctx.Err() != nil || ok && !time.Now().Before(deadline)
}

const (
	// uninstallQPS and uninstallBurst are the uninstall's whole budget
	// of requests: it runs once, and 10,000 WebApps take a delete each
	// (8 minutes at the operator's 20 QPS). The API server's priority and
	// fairness still shares it out with the rest of the cluster.
	uninstallQPS, uninstallBurst = 200, 200
	// sweepWorkers send the deletes of a pass concurrently, enough to use
	// uninstallQPS at a round trip of 80 ms.
	sweepWorkers = 16
	// sweepPage is the size of a page of the list of WebApps (or of
	// children): the hook pod holds one page at a time in its 64 MiB.
	sweepPage = 500
)

// webAppSweeper deletes every WebApp, one pass at a time.
type webAppSweeper struct {
	client versioned.Interface
	kube   kubernetes.Interface
	force  bool // remove every finalizer, not only handroll's legacy one
	out    io.Writer
	mu     sync.Mutex // serializes writes to out
}

// pass deletes the WebApps not yet being deleted and removes handroll's
// legacy finalizer, never another's unless forced, a page of the list at
// a time, concurrently. It returns those still there, each with what holds
// it, and, once every WebApp is gone, a child of one the garbage collector
// has yet to delete.
func (s *webAppSweeper) pass(ctx context.Context) (left []heldWebApp, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A WebApp with no child goes at once, with no work of the garbage
	// collector's, whose default 40 QPS would take minutes over 10,000
	// foreground deletions. Read once a pass, and only by a pass that
	// deletes; nil (children unknown): every one in the foreground.
	parents := sync.OnceValue(func() map[types.UID]heldWebApp {
		p, _ := s.parents(ctx)
		return p
	})
	var mu sync.Mutex
	work := make(chan *handrollv1.WebApp)
	var wg sync.WaitGroup
	for range sweepWorkers {
		wg.Go(func() {
			for w := range work {
				held, err := s.sweep(ctx, w, parents)
				if err != nil {
					cancel(err)
					continue
				}
				if held != nil {
					mu.Lock()
					left = append(left, *held)
					mu.Unlock()
				}
			}
		})
	}
	err = listPages(ctx, func(ctx context.Context, opts metav1.ListOptions) (metav1.ListInterface, error) {
		list, err := s.client.HandrollV1().WebApps(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			select {
			case work <- &list.Items[i]:
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		return list, nil
	})
	close(work)
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause
	}
	if err != nil {
		return nil, fmt.Errorf("listing the WebApps: %w", err)
	}
	if len(left) == 0 {
		// Every WebApp is gone; a child of one deleted in the background
		// (made after the list of children: the operator still runs) goes
		// with the garbage collector, which needs the CRD to find its
		// owner absent. A client that may not list children does not wait.
		orphans, err := s.parents(ctx)
		if err != nil && !apierrors.IsForbidden(err) {
			return nil, err
		}
		for uid, w := range orphans {
			left = append(left, heldWebApp{namespace: w.namespace, name: w.name, uid: uid, foreground: true})
		}
	}
	slices.SortFunc(left, func(a, b heldWebApp) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	return left, nil
}

// sweep deletes w and removes its finalizers as pass does, and returns w
// if it may still be there.
func (s *webAppSweeper) sweep(ctx context.Context, w *handrollv1.WebApp, parents func() map[types.UID]heldWebApp) (*heldWebApp, error) {
	client := s.client.HandrollV1().WebApps(w.Namespace)
	if w.DeletionTimestamp == nil {
		// Foreground for a WebApp with children: it stays until the
		// garbage collector has deleted them, so that "every WebApp is
		// gone" means their children are too. The CRD, deleted next, must
		// outlive them: once its kind is gone, the garbage collector can
		// no longer prove an owner absent and keeps the children. One
		// with none goes at once, in the background.
		policy := metav1.DeletePropagationForeground
		if p := parents(); p != nil && p[w.UID].name == "" {
			policy = metav1.DeletePropagationBackground
		}
		// Preconditioned on the UID read: a WebApp made since under the
		// same name is the next pass's.
		err := client.Delete(ctx, w.Name, metav1.DeleteOptions{PropagationPolicy: &policy, Preconditions: metav1.NewUIDPreconditions(string(w.UID))})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("deleting WebApp %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	patch, removes := webapp.LegacyFinalizerPatch(w), webapp.LegacyFinalizerDirectory
	others := slices.DeleteFunc(slices.Clone(w.Finalizers), func(f string) bool {
		return f == webapp.LegacyFinalizerDirectory || garbageCollectors(f)
	})
	if s.force && len(others) > 0 {
		patch, removes = removeFinalizersPatch(w), strings.Join(others, ", ")
	}
	if patch != nil {
		// Invalid: the finalizers changed since the list; the next pass reads them again.
		_, err := client.Patch(ctx, w.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
		switch {
		case err == nil && s.force && len(others) > 0:
			s.mu.Lock()
			fmt.Fprintf(s.out, "uninstall: removed the finalizer(s) %s from WebApp %s/%s: their clean-up is skipped\n", removes, w.Namespace, w.Name)
			s.mu.Unlock()
			return nil, nil
		case err != nil && !apierrors.IsNotFound(err) && !apierrors.IsInvalid(err):
			return nil, fmt.Errorf("removing %s from WebApp %s/%s: %w", removes, w.Namespace, w.Name, err)
		}
	}
	return &heldWebApp{namespace: w.Namespace, name: w.Name, uid: w.UID, others: others,
		foreground: slices.Contains(w.Finalizers, metav1.FinalizerDeleteDependents)}, nil
}

// parents returns the WebApps, by UID, that own one of the children the
// operator makes (its Deployments, Services and ConfigMaps), read a page
// at a time.
func (s *webAppSweeper) parents(ctx context.Context) (map[types.UID]heldWebApp, error) {
	found := map[types.UID]heldWebApp{}
	add := func(m metav1.Object) {
		for _, r := range m.GetOwnerReferences() {
			if r.Kind == "WebApp" && strings.HasPrefix(r.APIVersion, handrollv1.SchemeGroupVersion.Group+"/") {
				found[r.UID] = heldWebApp{namespace: m.GetNamespace(), name: r.Name}
			}
		}
	}
	opts := func(o metav1.ListOptions) metav1.ListOptions { o.LabelSelector = webapp.ChildSelector; return o }
	for _, list := range []func(context.Context, metav1.ListOptions) (metav1.ListInterface, error){
		func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
			l, err := s.kube.AppsV1().Deployments(metav1.NamespaceAll).List(ctx, opts(o))
			if err == nil {
				for i := range l.Items {
					add(&l.Items[i])
				}
			}
			return l, err
		},
		func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
			l, err := s.kube.CoreV1().Services(metav1.NamespaceAll).List(ctx, opts(o))
			if err == nil {
				for i := range l.Items {
					add(&l.Items[i])
				}
			}
			return l, err
		},
		func(ctx context.Context, o metav1.ListOptions) (metav1.ListInterface, error) {
			l, err := s.kube.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, opts(o))
			if err == nil {
				for i := range l.Items {
					add(&l.Items[i])
				}
			}
			return l, err
		},
	} {
		if err := listPages(ctx, list); err != nil {
			return nil, fmt.Errorf("listing the children of WebApps: %w", err)
		}
	}
	return found, nil
}

// listPages calls list for each page of a list of sweepPage items, so that
// no more than a page is held at a time.
func listPages(ctx context.Context, list func(context.Context, metav1.ListOptions) (metav1.ListInterface, error)) error {
	opts := metav1.ListOptions{Limit: sweepPage}
	for {
		l, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// heldWebApp is a WebApp still there after a pass, and what holds it.
type heldWebApp struct {
	namespace, name string
	uid             types.UID
	others          []string // other controllers' finalizers
	foreground      bool     // the garbage collector's foregroundDeletion
}

// heldNamed is how many WebApps heldMessage names.
const heldNamed = 100

// heldMessage says why each WebApp of left is still there after timeout,
// naming what holds it, and gives only the advice that would help: a
// child's finalizer is its own controller's, which --force-finalizers does
// not touch.
func heldMessage(ctx context.Context, kube kubernetes.Interface, left []heldWebApp, timeout time.Duration) string {
	var lines, advice []string
	var byOthers, byChildren bool
	for _, w := range left {
		byOthers = byOthers || len(w.others) > 0
		byChildren = byChildren || len(w.others) == 0 && w.foreground
	}
	for i, w := range left {
		if i == heldNamed {
			// helm prints the Job's log: thousands of lines would hide the advice.
			lines = append(lines, fmt.Sprintf("and %d more", len(left)-heldNamed))
			break
		}
		state := "being deleted"
		switch {
		case len(w.others) > 0:
			state = "held by the finalizer(s) " + strings.Join(w.others, ", ") + " of another controller"
		case w.foreground:
			state = "waiting for the garbage collector to delete its children"
			if children := childrenLeft(ctx, kube, w); len(children) > 0 {
				state += ": " + strings.Join(children, "; ")
			}
		}
		lines = append(lines, fmt.Sprintf("%s/%s (%s)", w.namespace, w.name, state))
	}
	if byOthers {
		advice = append(advice, "handroll removes only its own finalizer, so let the other controllers finish first (or force it: --force-finalizers)")
	}
	if byChildren {
		advice = append(advice, "a WebApp goes once the garbage collector has deleted its children, and a child's finalizer is its own controller's to remove")
	}
	msg := fmt.Sprintf("%d WebApp(s) still there after %s", len(left), timeout)
	if len(advice) > 0 {
		msg += "; " + strings.Join(advice, "; ")
	}
	return msg + ":\n  " + strings.Join(lines, "\n  ")
}

// childrenLeft names the children of w the operator makes (its Deployment,
// Service and ConfigMap) that are still there, each with the finalizers
// that hold it. Best effort: what it cannot read it leaves unnamed.
func childrenLeft(ctx context.Context, kube kubernetes.Interface, w heldWebApp) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := metav1.ListOptions{LabelSelector: webapp.ChildSelector}
	var found []string
	add := func(kind string, m metav1.Object) {
		if !slices.ContainsFunc(m.GetOwnerReferences(), func(r metav1.OwnerReference) bool { return r.UID == w.uid }) {
			return
		}
		desc := kind + " " + m.GetName()
		if fs := slices.DeleteFunc(slices.Clone(m.GetFinalizers()), garbageCollectors); len(fs) > 0 {
			desc += ", held by the finalizer(s) " + strings.Join(fs, ", ")
		} else if m.GetDeletionTimestamp() == nil {
			desc += ", not yet deleted"
		}
		found = append(found, desc)
	}
	if l, err := kube.AppsV1().Deployments(w.namespace).List(ctx, opts); err == nil {
		for i := range l.Items {
			add("Deployment", &l.Items[i])
		}
	}
	if l, err := kube.CoreV1().Services(w.namespace).List(ctx, opts); err == nil {
		for i := range l.Items {
			add("Service", &l.Items[i])
		}
	}
	if l, err := kube.CoreV1().ConfigMaps(w.namespace).List(ctx, opts); err == nil {
		for i := range l.Items {
			add("ConfigMap", &l.Items[i])
		}
	}
	return found
}

// garbageCollectors reports whether f is one of the garbage collector's
// own finalizers, which it removes once it has dealt with the children.
func garbageCollectors(f string) bool {
	return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents
}

// removeFinalizersPatch removes every finalizer of w but the garbage
// collector's, provided they are still the ones read: a finalizer added
// since is not judged unread.
func removeFinalizersPatch(w *handrollv1.WebApp) []byte {
	keep := slices.DeleteFunc(slices.Clone(w.Finalizers), func(f string) bool { return !garbageCollectors(f) })
	last := map[string]any{"op": "remove", "path": "/metadata/finalizers"}
	if len(keep) > 0 {
		last = map[string]any{"op": "replace", "path": "/metadata/finalizers", "value": keep}
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": w.UID},
		{"op": "test", "path": "/metadata/finalizers", "value": w.Finalizers},
		last,
	})
	if err != nil {
		panic(fmt.Sprintf("marshalling a JSON patch of strings cannot fail: %v", err))
	}
	return patch
}

// scaleToZero scales the operator's Deployment to 0 and waits until its
// pods are gone: a replica still running would recreate its Lease and the
// directory. A Deployment already gone is not an error.
func scaleToZero(ctx context.Context, kube kubernetes.Interface, ns, name string, timeout time.Duration, out io.Writer) error {
	deployments := kube.AppsV1().Deployments(ns)
	d, err := deployments.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("reading Deployment %s/%s: %w", ns, name, err)
	}
	if ptr.Deref(d.Spec.Replicas, 1) != 0 {
		patch := []byte(`{"spec":{"replicas":0}}`)
		if _, err := deployments.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "scale"); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("scaling Deployment %s/%s to 0: %w", ns, name, err)
		}
	}
	selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil {
		return fmt.Errorf("Deployment %s/%s: %w", ns, name, err)
	}
	var running []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return false, nil //nolint:nilerr // the next poll asks again
		}
		running = running[:0]
		for _, p := range pods.Items {
			running = append(running, p.Name)
		}
		return len(running) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the operator's pods %v still run %s after scaling Deployment %s/%s to 0", running, timeout, ns, name)
	}
	fmt.Fprintf(out, "uninstall: Deployment %s/%s scaled to 0, its pods are gone\n", ns, name)
	return nil
}

// deleteRuntimeObjects deletes what the operator made as it ran, in its
// namespace: the leader Lease and the shard Leases named after it, the
// directory's parts, the CA ConfigMap (--metrics-ca-configmap) and the
// certificate Secret if handroll made them (a user's own, given with the
// same name, stays).
func deleteRuntimeObjects(ctx context.Context, kube kubernetes.Interface, o uninstallOptions, out io.Writer) error {
	var deleted []string
	gone := func(kind, name string, err error) error {
		switch {
		case err == nil:
			deleted = append(deleted, kind+" "+name)
		case !apierrors.IsNotFound(err):
			return fmt.Errorf("deleting %s %s/%s: %w", kind, o.namespace, name, err)
		}
		return nil
	}
	leases, err := kube.CoordinationV1().Leases(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the Leases in %s: %w", o.namespace, err)
	}
	for _, l := range leases.Items {
		if l.Name == o.leaseName || shard.GroupLease(o.leaseName, l.Name) {
			if err := gone("Lease", l.Name, kube.CoordinationV1().Leases(o.namespace).Delete(ctx, l.Name, metav1.DeleteOptions{})); err != nil {
				return err
			}
		}
	}
	cms, err := kube.CoreV1().ConfigMaps(o.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the ConfigMaps in %s: %w", o.namespace, err)
	}
	for _, cm := range cms.Items {
		_, directory := webapp.DirectoryPartIndex(cm.Name)
		if directory || labelled(cm.Labels, certs.CAConfigMapLabels()) {
			// Preconditioned on the UID listed, as the Secret below.
			opts := metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(cm.UID))}
			if err := gone("ConfigMap", cm.Name, kube.CoreV1().ConfigMaps(o.namespace).Delete(ctx, cm.Name, opts)); err != nil {
				return err
			}
		}
	}
	secret, err := kube.CoreV1().Secrets(o.namespace).Get(ctx, o.secretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("reading Secret %s/%s: %w", o.namespace, o.secretName, err)
	case selfManagedSecret(secret):
		// Preconditioned on the UID read: a Secret made in between is not ours to judge.
		err := kube.CoreV1().Secrets(o.namespace).Delete(ctx, secret.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(secret.UID))})
		if err := gone("Secret", secret.Name, err); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "uninstall: deleted from %s: %s\n", o.namespace, orNothing(deleted))
	return nil
}

// selfManagedSecret tells whether s was made by pkg/certs.
func selfManagedSecret(s *corev1.Secret) bool {
	return labelled(s.Labels, certs.SecretLabels())
}

// labelled tells whether labels hold every label of want.
func labelled(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func orNothing(names []string) string {
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}
