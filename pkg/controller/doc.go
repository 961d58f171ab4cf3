// Package controller is handroll's generic controller machinery: event
// handlers that enqueue keys, a rate-limited priority workqueue, a pool of
// workers and the Reconcile contract between them. It knows nothing about
// WebApps.
//
// Manager piece replaced: controller.New and builder.For/Owns/Watches from
// controller-runtime (its internal/controller.Controller), written on
// client-go's tools/cache and util/workqueue.
//
// The path of one event, file by file:
//
//	informer ─event─▶ handler.go        predicates filter the event; a Handler
//	                                    turns its object into Requests, queued
//	                                    at the event's priority
//	         ─key───▶ priorityqueue.go  client-go's workqueue with three
//	                                    priorities: de-duplicates keys, delays
//	                                    retries, hands out progress (a child's
//	                                    rollout), then live changes, then the
//	                                    initial list and resyncs
//	         ─key───▶ controller.go     a worker takes a key, calls Reconcile
//	                                    and, from the outcome, forgets the key,
//	                                    retries it with backoff or requeues it
//	                                    later, at the key's priority
//	                  metrics.go        what each step reports to Prometheus,
//	                                    under controller-runtime's metric names
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
//	priorityqueue.PriorityQueue             priorityWorkqueue (priorityqueue.go)
//	handler.WithLowPriorityWhenUnchanged    every Watch (the Queue a Handler gets)
//	metrics.Registry                        Options.Registerer
//	its workqueue metrics provider          Options.Registerer, RegisterWorkqueueMetrics
//
// Deliberate differences from controller-runtime, each explained where it is
// implemented: the priority queue is built on client-go's workqueue, so
// de-duplication and the workqueue metrics are client-go's (workqueue_depth
// keeps an empty "priority" label), and a delayed key waits outside the
// queue, as in client-go (priorityqueue.go); a reconcile still running at
// shutdown keeps a live context until Options.ShutdownTimeout; a terminal
// error also clears the key's backoff; workqueue metrics can go to the same
// registry as the controller metrics instead of only through client-go's
// process-global provider; while the API server is unavailable every worker
// pauses, instead of each failing key retrying on its own (unavailable.go);
// an optional Journal records each reconcile's start and end (journal.go).
package controller
