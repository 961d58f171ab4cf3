// Command minimal is hack/compare/examples/minimal, the smallest
// controller-runtime operator for WebApps, written with handroll's own
// packages instead of a Manager: one controller that watches WebApps and
// the Deployments they control, a metrics server, a Lease, and the start
// and stop in the Manager's order. Its reconciler prints the WebApp and how
// many Deployments it controls. README.md sets the two side by side.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/controller"
	clientset "github.com/handroll/handroll/pkg/generated/clientset/versioned"
	handrollinformers "github.com/handroll/handroll/pkg/generated/informers/externalversions"
	"github.com/handroll/handroll/pkg/leader"
	"github.com/handroll/handroll/pkg/server"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "Path to a kubeconfig; empty: in-cluster.")
	leaseNamespace := flag.String("lease-namespace", "default", "Namespace of the Lease minimal-example.")
	metricsAddr := flag.String("metrics-bind-address", ":8080", "Address of /metrics.")
	flag.Parse()

	// ctrl.SetupSignalHandler: the first SIGINT or SIGTERM ends ctx; stop
	// then restores the default action, so a second one ends the process.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }()

	// ctrl.GetConfigOrDie and the cluster's clients.
	cfg, kube, handroll := newClients(*kubeconfig)

	// The Manager's cache: one informer per kind, in every namespace,
	// resynced every 10 hours (cache.Options.SyncPeriod's default).
	kubeInformers := informers.NewSharedInformerFactory(kube, 10*time.Hour)
	handrollInformers := handrollinformers.NewSharedInformerFactory(handroll, 10*time.Hour)
	webapps := handrollInformers.Handroll().V1().WebApps()
	deployments := kubeInformers.Apps().V1().Deployments()

	// Options.Metrics, on a registry of its own (metrics.Registry).
	registry := server.NewRegistry()
	server.RegisterClientGoMetrics(registry)
	metrics := &server.Server{Name: "metrics", Addr: *metricsAddr, Handler: server.MetricsHandler(registry)}

	// LeaderElection, LeaderElectionID, LeaderElectionNamespace,
	// LeaderElectionReleaseOnCancel: 15 s, 10 s and 2 s, as the Manager's.
	opts := leader.DefaultOptions()
	opts.LeaseName, opts.LeaseNamespace = "minimal-example", *leaseNamespace
	elector, err := leader.New(cfg, opts, registry)
	check(err)

	// ctrl.NewControllerManagedBy(mgr).For(&WebApp{}).Owns(&Deployment{}).
	c, err := controller.New(controller.Options{Name: "webapp", Registerer: registry},
		controller.ReconcilerFunc(func(_ context.Context, req controller.Request) (controller.Result, error) {
			app, err := webapps.Lister().WebApps(req.Namespace).Get(req.Name)
			if err != nil {
				if apierrors.IsNotFound(err) {
					err = nil
				}
				return controller.Result{}, err
			}
			list, err := deployments.Lister().Deployments(req.Namespace).List(labels.Everything())
			if err != nil {
				return controller.Result{}, err
			}
			owned := 0
			for _, d := range list {
				if ref := metav1.GetControllerOf(d); ref != nil && ref.UID == app.UID {
					owned++
				}
			}
			fmt.Printf("reconciled WebApp %s: image %s, %d owned Deployment(s)\n", req, app.Spec.Image, owned)
			return controller.Result{}, nil
		}))
	check(err)
	check(c.Watch(webapps.Informer(), controller.EnqueueObject()))
	check(c.Watch(deployments.Informer(), controller.EnqueueOwner(handrollv1.Kind("WebApp"), true)))

	// mgr.Start: the HTTP server, then the caches, synced, then the
	// election; the controller runs only on the leader. A server that fails
	// stops everything, as a failing runnable stops the Manager.
	stopServer, served := serveMetrics(metrics, stop)
	stopCaches := make(chan struct{})
	kubeInformers.Start(stopCaches)
	handrollInformers.Start(stopCaches)
	if cache.WaitForCacheSync(ctx.Done(), webapps.Informer().HasSynced, deployments.Informer().HasSynced) {
		// Run returns once the controller has drained and the Lease is
		// released; at once, with an error, if the Lease is lost: another
		// replica may lead already, so exit without stopping anything.
		check(elector.Run(ctx, func(leading context.Context) error {
			return c.Start(leading, webapps.Informer().HasSynced, deployments.Informer().HasSynced)
		}))
	}

	// The stop, in reverse: the caches, then the server.
	close(stopCaches)
	kubeInformers.Shutdown()
	handrollInformers.Shutdown()
	stopServer()
	check(<-served)
}

// newClients loads the config from --kubeconfig, else in-cluster, and makes
// a clientset for Kubernetes' types and one for handroll's.
func newClients(kubeconfig string) (*rest.Config, *kubernetes.Clientset, *clientset.Clientset) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	check(err)
	kube := kubernetes.NewForConfigOrDie(cfg)
	handroll := clientset.NewForConfigOrDie(cfg)
	return cfg, kube, handroll
}

// serveMetrics binds the metrics server's port, so that a port taken fails
// before anything else starts, and serves until the returned func is
// called; the channel then says how the server ended. A server that fails
// calls stop.
func serveMetrics(metrics *server.Server, stop context.CancelFunc) (context.CancelFunc, <-chan error) {
	check(metrics.Listen())
	serverCtx, stopServer := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		err := metrics.Serve(serverCtx, 30*time.Second)
		served <- err
		if err != nil {
			stop()
		}
	}()
	return stopServer, served
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
