// Command minimal is the smallest controller-runtime operator for WebApps:
// one Manager, one controller For(&WebApp{}).Owns(&appsv1.Deployment{}),
// and mgr.Start with the signal handler. Its reconciler prints the WebApp
// and how many Deployments it controls. examples/minimal in the main module
// is the same program on handroll's own packages; its README sets the two
// side by side.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
)

func main() {
	leaseNamespace := flag.String("lease-namespace", "default", "Namespace of the Lease minimal-example.")
	metricsAddr := flag.String("metrics-bind-address", ":8080", "Address of /metrics.")
	flag.Parse() // --kubeconfig is controller-runtime's own flag
	ctrl.SetLogger(klog.Background())

	scheme := runtime.NewScheme()
	check(clientgoscheme.AddToScheme(scheme))
	check(handrollv1.AddToScheme(scheme))
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                        scheme,
		LeaderElection:                true,
		LeaderElectionID:              "minimal-example",
		LeaderElectionNamespace:       *leaseNamespace,
		LeaderElectionReleaseOnCancel: true,
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
	})
	check(err)

	c := mgr.GetClient() // reads from the Manager's cache
	check(ctrl.NewControllerManagedBy(mgr).For(&handrollv1.WebApp{}).Owns(&appsv1.Deployment{}).
		Complete(reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
			var app handrollv1.WebApp
			if err := c.Get(ctx, req.NamespacedName, &app); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			var deployments appsv1.DeploymentList
			if err := c.List(ctx, &deployments, client.InNamespace(req.Namespace)); err != nil {
				return ctrl.Result{}, err
			}
			owned := 0
			for i := range deployments.Items {
				if ref := metav1.GetControllerOf(&deployments.Items[i]); ref != nil && ref.UID == app.UID {
					owned++
				}
			}
			fmt.Printf("reconciled WebApp %s: image %s, %d owned Deployment(s)\n", req, app.Spec.Image, owned)
			return ctrl.Result{}, nil
		})))

	check(mgr.Start(ctrl.SetupSignalHandler()))
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
