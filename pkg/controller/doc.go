// Package controller is handroll's generic controller machinery: event
// handlers that enqueue keys, a rate-limited workqueue, a pool of workers and
// the Reconcile contract between them. It knows nothing about WebApps.
//
// Manager piece replaced: controller.New and builder.For/Owns/Watches from
// controller-runtime (its internal/controller.Controller), written on
// client-go's tools/cache and util/workqueue.
//
// The path of one event, file by file:
//
//	informer ─event─▶ handler.go     predicates filter the event; a Handler
//	                                 turns its object into Requests
//	         ─key───▶ the workqueue  de-duplicates keys, delays retries
//	         ─key───▶ controller.go  a worker takes a key, calls Reconcile and,
//	                                 from the outcome, forgets the key, retries
//	                                 it with backoff or requeues it later
//	                  metrics.go     what each step reports to Prometheus,
//	                                 under controller-runtime's metric names
//
// How the pieces map to controller-runtime v0.25:
//
//	controller-runtime                      here
//	reconcile.Request, Result, Reconciler   Request, Result, Reconciler
//	reconcile.TerminalError                 TerminalError, IsTerminal
//	controller.Options                      Options
//	controller.New, Controller.Start        New, Controller.Start
//	builder.For(obj)                        Watch(informer, EnqueueObject())
//	builder.Owns(obj)                       Watch(informer, EnqueueOwner(gk, true))
//	builder.Watches(obj, handler.EnqueueRequestsFromMapFunc(fn))
//	                                        Watch(informer, EnqueueMapped(fn))
//	predicate.GenerationChangedPredicate…   GenerationChanged(), …
//	metrics.Registry                        Options.Registerer
//	its workqueue metrics provider          Options.Registerer, RegisterWorkqueueMetrics
//
// Deliberate differences from controller-runtime, each explained where it is
// implemented: the queue is client-go's plain rate-limiting queue (not
// controller-runtime's default priority queue); a reconcile still running at
// shutdown keeps a live context until Options.ShutdownTimeout; a terminal
// error also clears the key's backoff; workqueue metrics can go to the same
// registry as the controller metrics instead of only through client-go's
// process-global provider; while the API server is unavailable every worker
// pauses, instead of each failing key retrying on its own (unavailable.go);
// an optional Journal records each reconcile's start and end (journal.go).
package controller
