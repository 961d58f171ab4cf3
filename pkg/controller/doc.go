// Package controller is handroll's generic controller machinery: event
// handlers that enqueue keys, a rate-limited workqueue, a pool of workers and
// the Reconcile contract between them. It knows nothing about WebApps.
//
// Manager piece replaced: controller.New and builder.For/Owns/Watches from
// controller-runtime (its internal/controller.Controller), written on
// client-go's tools/cache and util/workqueue.
package controller
