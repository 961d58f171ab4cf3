// Command informer-workqueue is the smallest controller in one file: an
// informer watches the ConfigMaps of one namespace, its event handler puts
// each object's key on a rate-limited workqueue, and workers reconcile keys
// from the informer's cache. The reconcile writes the annotation
// examples.handroll.dev/data-sha256, a hash of the ConfigMap's data.
//
// Watch for: "informer synced" before any reconcile, one "reconciling" line
// for many events when a ConfigMap changes quickly (the queue holds a key
// once, however often it is added), and "retrying" after a failed write.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const annotation = "examples.handroll.dev/data-sha256"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; empty: in-cluster.")
	namespace := flag.String("namespace", "default", "Namespace whose ConfigMaps are reconciled.")
	workers := flag.Int("workers", 2, "Keys reconciled in parallel (never the same key twice at once).")
	work := flag.Duration("work", time.Second, "How long each reconcile pretends to work, so that events pile up meanwhile.")
	flag.Parse()

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	client := kubernetes.NewForConfigOrDie(cfg)
	// SIGTERM (what Kubernetes sends a pod) or Ctrl-C ends ctx.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// One informer per kind, shared by everything in the process that asks
	// the factory for it; 0: no periodic resync, only real changes.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(*namespace))
	informer := factory.Core().V1().ConfigMaps()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "configmaps"})

	// events counts the events per key since its last reconcile, only to
	// show how many a single reconcile stands for.
	var mu sync.Mutex
	events := map[string]int{}
	enqueue := func(obj any) {
		// The key is "namespace/name"; tombstones of deletions too.
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		mu.Lock()
		events[key]++
		mu.Unlock()
		queue.Add(key) // a key already waiting is not added twice
	}
	_, err = informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	})
	check(err)

	factory.StartWithContext(ctx)
	// Workers read the cache, so they wait until it holds every object.
	check(factory.WaitForCacheSyncWithContext(ctx).AsError())
	fmt.Printf("informer synced: watching ConfigMaps in %s with %d workers\n", *namespace, *workers)

	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			// Get blocks until a key is ready; it returns shutdown once the
			// queue is shut down and empty. A key is handed to one worker
			// at a time.
			for key, shutdown := queue.Get(); !shutdown; key, shutdown = queue.Get() {
				if ctx.Err() != nil { // stopping: leave the rest undone
					queue.Done(key)
					continue
				}
				mu.Lock()
				n := events[key]
				delete(events, key)
				mu.Unlock()
				fmt.Printf("reconciling %s (%d events since its last reconcile)\n", key, n)
				select { // the pretend work, cut short by a signal
				case <-time.After(*work):
				case <-ctx.Done():
				}
				if err := reconcile(ctx, client, informer.Lister(), key); err != nil {
					fmt.Printf("retrying %s after error: %v\n", key, err)
					queue.AddRateLimited(key) // back off: 5ms, 10ms, 20ms, ...
				} else {
					queue.Forget(key) // success resets the key's back-off
				}
				// Done lets the key be handed out again; if it was added
				// while it was being reconciled, it is queued once more now.
				queue.Done(key)
			}
		})
	}

	<-ctx.Done()
	fmt.Println("shutting down: no new keys; waiting for workers")
	queue.ShutDown() // Get now drains what is queued, then reports shutdown
	wg.Wait()
	factory.Shutdown()
	fmt.Println("stopped")
}

// reconcile makes the cluster match what one key calls for, whatever events
// led here: it reads the current state and acts on it, so a key reconciled
// once after ten changes ends where ten reconciles would.
func reconcile(ctx context.Context, client kubernetes.Interface, lister listersv1.ConfigMapLister, key string) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key) // our handler made the key
	cm, err := lister.ConfigMaps(ns).Get(name)
	if apierrors.IsNotFound(err) {
		fmt.Printf("%s: deleted, nothing to do\n", key)
		return nil
	}
	if err != nil {
		return err
	}
	sum := dataHash(cm)
	if cm.Annotations[annotation] == sum {
		// Writing anyway would cause an update event, hence another
		// reconcile, forever.
		fmt.Printf("%s: up to date\n", key)
		return nil
	}
	// Objects from the cache are shared: change a copy, never the original.
	cm = cm.DeepCopy()
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[annotation] = sum
	// Update carries the resourceVersion read from the cache: if the object
	// changed since, it fails with a conflict and the retry reads it anew.
	if _, err := client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	fmt.Printf("%s: annotated %s=%s\n", key, annotation, sum)
	return nil
}

// dataHash is a short SHA-256 of the ConfigMap's data (json.Marshal sorts
// map keys, so equal data gives equal bytes).
func dataHash(cm *corev1.ConfigMap) string {
	b, _ := json.Marshal(cm.Data)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
