package main

// The files the page shows, from the repository root.
const (
	hrMain     = "cmd/handroll/main.go"
	hrVersion  = "cmd/handroll/version.go"
	hrStart    = "cmd/handroll/start.go"
	hrReady    = "cmd/handroll/readiness.go"
	hrScope    = "cmd/handroll/scope.go"
	hrRec      = "pkg/controller/webapp/reconciler.go"
	hrRef      = "pkg/controller/webapp/refconfigmaps.go"
	hrCtl      = "pkg/controller/webapp/controller.go"
	hrWritten  = "pkg/controller/webapp/written.go"
	twinMain   = "hack/compare/cmd/handroll-twin/main.go"
	twinWebApp = "hack/compare/cmd/handroll-twin/webapp.go"
)

// A pair is one section of the page: handroll's code beside the twin's,
// step by step.
type pair struct {
	title, intro string
	// piece begins the name of the docs/lines.md row that counts both sides;
	// pieceLabel says what that row covers.
	piece, pieceLabel string
	// options, when set, is the twin's literal whose fields the steps name:
	// every field must be in exactly one step.
	options *optionsLiteral
	steps   []step
}

// optionsLiteral is the one composite literal of type typ in fn of file.
type optionsLiteral struct{ file, fn, typ string }

// A step is one thing both sides do.
type step struct {
	title, does    string
	handroll, twin side
}

// side is what one side writes for a step.
type side struct {
	parts []part
	// fields are keys of the pair's options literal that this step sets.
	fields []string
	// note says what the side does instead, or more; with no parts and no
	// fields it is all the side shows.
	note string
}

var pairs = []pair{
	{
		title: "The start sequence: `cmd/handroll/start.go` beside the twin's `main.go`",
		intro: "handroll's `start` is the Manager's `NewManager` and `Start` written out, in numbered steps " +
			"(its comments `// Step N —` and its errors name them): `connect` does steps 3 to 5, `process.serve` step 6, " +
			"`process.events` step 7, and `runLeader` steps 8 to 12 for the single leader's one scope (`cmd/handroll/scope.go`; " +
			"with --shards, `cmd/handroll/sharded.go` runs one scope per range); steps 1 and 2 are in `cmd/handroll/main.go`. " +
			"The twin's `run` sets the options of the same pieces (`managerOptions`) and hands them to `ctrl.NewManager`; " +
			"each of that call's fields is shown in the step it configures, and counted there.",
		piece:      "Start sequence",
		pieceLabel: "all of `cmd/handroll/`, with config.go, events.go, signals.go and webhooks.go, which the steps call",
		options:    &optionsLiteral{file: twinMain, fn: "options.managerOptions", typ: "ctrl.Options"},
		steps: []step{
			{
				title: "1. Flags",
				does:  "Declare the command-line flags, parse and check them, and set up logging.",
				handroll: side{parts: []part{
					whole(hrMain, "options"),
					whole(hrMain, "options.addFlags"),
					stmts(hrMain, "run", "// Step 1 —", "// Step 2 —"),
					whole(hrMain, "logFlag"),
					whole(hrVersion, "printVersion"),
				}},
				twin: side{parts: []part{
					whole(twinMain, "options"),
					whole(twinMain, "options.addFlags"),
					whole(twinMain, "options.validate"),
					stmts(twinMain, "main", "", "run(o)"),
				}},
			},
			{
				title: "2. Signals",
				does:  "SIGINT or SIGTERM cancels the context and starts a graceful stop; a second one exits at once.",
				handroll: side{
					parts: []part{stmts(hrMain, "run", "// Step 2 —", "start(ctx, o)")},
					note:  "`signalContext` is in `cmd/handroll/signals.go`.",
				},
				twin: side{parts: []part{stmts(twinMain, "run", "ctrl.SetupSignalHandler(", "r := &WebAppReconciler{")}},
			},
			{
				title: "3. Config",
				does:  "Load the rest.Config (the flag, KUBECONFIG, in-cluster, ~/.kube/config) with the client's rate limits, and settle the operator's namespace.",
				handroll: side{
					parts: []part{
						whole(hrStart, "start"),
						whole(hrStart, "process"),
						stmts(hrStart, "connect", "// Step 3 —", "// Step 4 —"),
					},
					note: "`loadConfig`, `resolveNamespaces` and `localWebhooks` are in `cmd/handroll/config.go`.",
				},
				twin: side{parts: []part{
					stmts(twinMain, "run", "", "scheme.New("),
					stmts(twinMain, "restConfigs", "", "o.kubeAPIQPS > 0"),
					stmts(twinMain, "run", `o.operatorNamespace == ""`, "o.managerOptions("),
				}},
			},
			{
				title:    "4. Scheme",
				does:     "Register the API types, handroll's and Kubernetes', in one runtime.Scheme.",
				handroll: side{parts: []part{stmts(hrStart, "connect", "// Step 4 —", "// Step 5 —")}},
				twin: side{
					parts:  []part{stmts(twinMain, "run", "scheme.New(", `o.operatorNamespace == ""`)},
					fields: []string{"Scheme"},
				},
			},
			{
				title: "5. Clients and RESTMapper",
				does:  "Make the clients that write and read live, and the RESTMapper; check that the API server serves WebApps.",
				handroll: side{parts: []part{
					stmts(hrStart, "connect", "// Step 5 —", ""),
					whole(hrStart, "withOwnBucket"),
				}},
				twin: side{
					parts: []part{stmts(twinMain, "restConfigs", "o.kubeAPIQPS > 0", "")},
					note:  "`ctrl.NewManager` makes the client, the API reader and the RESTMapper; the twin gives the process one rate limiter and leader election its own.",
				},
			},
			{
				title: "6. HTTP servers and health checks",
				does:  "Bind the metrics, health, webhook and pprof servers before anything else starts, with the liveness and readiness checks.",
				handroll: side{
					parts: []part{
						whole(hrStart, "process.serve"),
						whole(hrReady, "addReadiness"),
						whole(hrStart, "servers"),
						whole(hrStart, "newServers"),
						whole(hrStart, "metricsHandler"),
						whole(hrStart, "metricsReviewQPS"),
						whole(hrStart, "servers.serve"),
						whole(hrStart, "servers.stop"),
					},
					note: "`webhookServer` is in `cmd/handroll/webhooks.go`; the twin serves no webhooks.",
				},
				twin: side{
					parts: []part{
						stmts(twinMain, "options.managerOptions", "metricsserver.Options{", "return ctrl.Options{"),
						stmts(twinMain, "run", "mgr.AddHealthzCheck(", "mgr.AddReadyzCheck("),
					},
					fields: []string{"Metrics", "HealthProbeBindAddress", "PprofBindAddress"},
				},
			},
			{
				title: "7. Events",
				does:  "An events.k8s.io/v1 broadcaster, on a client of its own, and the recorder the controller writes events with.",
				handroll: side{
					parts: []part{whole(hrStart, "process.events")},
					note:  "`flushingSink` is in `cmd/handroll/events.go`.",
				},
				twin: side{note: "None: `ctrl.NewManager` makes the broadcaster, and `mgr.GetEventRecorder` (step 9) the recorder."},
			},
			{
				title: "8. Cache",
				does:  "Informers for WebApps and the children, per namespace, label-filtered, metadata only where the whole object is not needed, and the readiness check that they have synced.",
				handroll: side{parts: []part{
					stmts(hrStart, "runLeader", "// Step 8 —", "// Step 9 —"),
					whole(hrScope, "scope"),
					whole(hrScope, "process.cacheOptions"),
					whole(hrStart, "webAppInformers"),
					whole(hrReady, "leaderSyncCheck"),
					whole(hrStart, "isClosed"),
				}},
				twin: side{
					parts: []part{
						stmts(twinMain, "options.managerOptions", "ours := labels.SelectorFromSet(", "controllers := config.Controller{"),
						stmts(twinMain, "options.managerOptions", "configMaps.Label = ours", "leaseNamespace :="),
						stmts(twinMain, "run", "o.refMetadataCache(", "mgr.AddHealthzCheck("),
						whole(twinMain, "options.refMetadataCache"),
						stmts(twinMain, "run", "mgr.AddReadyzCheck(", "ctrl.SetupSignalHandler("),
						whole(twinMain, "managerCache"),
						whole(twinMain, "managerCache.GetCache"),
					},
					fields: []string{"Cache"},
				},
			},
			{
				title: "9. Controllers",
				does:  "The WebApp controller and the directory's controller, with their reconcilers, workers and the time they get to drain.",
				handroll: side{parts: []part{
					stmts(hrStart, "runLeader", "// Step 9 —", "// Step 10 —"),
					whole(hrScope, "scopeControllers"),
					whole(hrScope, "process.controllers"),
					whole(hrScope, "openJournal"),
					whole(hrStart, "newWebAppReconciler"),
					whole(hrStart, "drainTimeout"),
				}},
				twin: side{
					parts: []part{
						stmts(twinMain, "options.managerOptions", "controllers := config.Controller{", "configMaps.Label = ours"),
						stmts(twinMain, "run", "r := &WebAppReconciler{", "mgr.Start("),
					},
					fields: []string{"Controller"},
				},
			},
			{
				title:    "The Manager: `ctrl.NewManager`",
				does:     "The twin's one call that builds the pieces of steps 3 to 9 and the elector of step 11 from their options.",
				handroll: side{note: "None: each step builds its own piece."},
				twin: side{
					parts: []part{
						stmts(twinMain, "run", "o.managerOptions(", "o.refMetadataCache("),
						stmts(twinMain, "options.managerOptions", "return ctrl.Options{", ""),
					},
					note: "Its fields are counted in the steps that show them.",
				},
			},
			{
				title: "10. Start the caches, then the controllers",
				does:  "Start the informers and wait for them, within --cache-sync-timeout, before a controller runs; with warm standby, before the election.",
				handroll: side{parts: []part{
					stmts(hrStart, "runLeader", "// Step 10 —", "// Step 11 —"),
					whole(hrStart, "syncLeaderCaches"),
				}},
				twin: side{
					parts: []part{stmts(twinMain, "run", "mgr.Start(", "")},
					note:  "`mgr.Start` does steps 10 to 12.",
				},
			},
			{
				title: "11. Leader election",
				does:  "Only the leader runs the controllers; the Lease is released on a clean stop, and a lost Lease ends the process.",
				handroll: side{parts: []part{
					stmts(hrStart, "runLeader", "// Step 11 —", "// Step 12 —"),
					whole(hrStart, "process.lead"),
					whole(hrScope, "scopeControllers.run"),
					whole(hrStart, "runControllers"),
				}},
				twin: side{
					parts: []part{stmts(twinMain, "options.managerOptions", "leaseNamespace :=", "metricsserver.Options{")},
					fields: []string{
						"LeaderElection", "LeaderElectionResourceLock", "LeaderElectionConfig", "LeaderElectionID",
						"LeaderElectionNamespace", "LeaderElectionReleaseOnCancel", "LeaseDuration", "RenewDeadline", "RetryPeriod",
					},
				},
			},
			{
				title: "12. Run and stop",
				does:  "Run until a signal or a failing component, then stop in reverse order within --graceful-shutdown-timeout, and exit with the error.",
				handroll: side{parts: []part{
					stmts(hrStart, "runLeader", "// Step 12 —", ""),
					whole(hrStart, "stopper"),
					whole(hrStart, "stopper.stop"),
					whole(hrStart, "stopper.waitThenStop"),
					whole(hrStart, "flushEvents"),
					stmts(hrMain, "run", "start(ctx, o)", ""),
				}},
				twin: side{
					parts:  []part{stmts(twinMain, "main", "run(o)", "")},
					fields: []string{"GracefulShutdownTimeout"},
				},
			},
		},
	},
	{
		title: "The WebApp reconciler: `pkg/controller/webapp/reconciler.go` beside the twin's `webapp.go`",
		intro: "`Reconcile` and what it calls, step by step. Both sides call the same shared code of " +
			"`pkg/controller/webapp` for the desired children (`DesiredDeployment` and the rest), the no-write check " +
			"(`FirstDifference`), the status (`ComputeStatus`) and the legacy finalizer's patch (`LegacyFinalizerPatch`); " +
			"it is not shown. handroll reads from listers and writes with the typed clientsets; the twin reads " +
			"through the manager's cache and writes with the controller-runtime client.",
		piece:      "Reconcilers",
		pieceLabel: "also the directory's controller, on both sides; refconfigmaps.go and written.go are in its row of shared reconciler code",
		steps: []step{
			{
				title: "1. The reconciler",
				does:  "What the reconciler holds: where it reads and how it writes.",
				handroll: side{parts: []part{
					whole(hrRec, "Reconciler"),
					whole(hrRef, "MetadataGetter"),
					whole(hrRec, "applyOptions"),
				}},
				twin: side{parts: []part{whole(twinWebApp, "WebAppReconciler")}},
			},
			{
				title: "2. Its own writes",
				does:  "handroll remembers what it wrote until its cache shows it, so that a reconcile that runs before the write's event compares with the write and does not make it again.",
				handroll: side{parts: []part{
					whole(hrRec, "writtenKeys"),
					whole(hrRec, "childKey"),
					whole(hrWritten, "writtenMaxAge"),
					whole(hrWritten, "justWritten"),
					whole(hrWritten, "written"),
					whole(hrWritten, "justWritten.seen"),
					whole(hrWritten, "justWritten.wrote"),
					whole(hrWritten, "justWritten.forget"),
				}},
				twin: side{note: "None: the twin compares with what its cache shows."},
			},
			{
				title:    "3. Read the WebApp",
				does:     "Get the WebApp from the cache; when it is gone there is nothing to do (the garbage collector removes its children).",
				handroll: side{parts: []part{stmts(hrRec, "Reconciler.Reconcile", "", "LegacyFinalizerPatch(")}},
				twin:     side{parts: []part{stmts(twinWebApp, "WebAppReconciler.Reconcile", "", "webapp.LegacyFinalizerPatch(")}},
			},
			{
				title: "4. The legacy finalizer",
				does:  "Remove the first version's finalizer with a JSON patch that tests the entry.",
				handroll: side{parts: []part{
					stmts(hrRec, "Reconciler.Reconcile", "LegacyFinalizerPatch(", "cached.DeletionTimestamp"),
					whole(hrRec, "Reconciler.removeLegacyFinalizer"),
				}},
				twin: side{parts: []part{stmts(twinWebApp, "WebAppReconciler.Reconcile", "webapp.LegacyFinalizerPatch(", "w.DeletionTimestamp")}},
			},
			{
				title:    "5. Deleted, copied, defaulted",
				does:     "A WebApp being deleted needs nothing; otherwise work on a copy with its defaults set (handroll's cache object is shared with every reader).",
				handroll: side{parts: []part{stmts(hrRec, "Reconciler.Reconcile", "cached.DeletionTimestamp", "r.reconcileChildren(")}},
				twin:     side{parts: []part{stmts(twinWebApp, "WebAppReconciler.Reconcile", "w.DeletionTimestamp", "r.reconcileChildren(")}},
			},
			{
				title: "6. The referenced ConfigMap",
				does:  "Hand over to reconcileChildren (steps 6 to 9), which first reads the spec.configMapRef ConfigMap, whose data goes into the config hash; its data is read live only when its resourceVersion moves.",
				handroll: side{parts: []part{
					stmts(hrRec, "Reconciler.Reconcile", "r.reconcileChildren(", "r.updateStatus("),
					stmts(hrRec, "Reconciler.reconcileChildren", "", "in := inputsOf("),
					whole(hrRef, "Reconciler.referenced"),
					whole(hrRef, "RefConfigMaps"),
					whole(hrRef, "RefConfigMaps.Get"),
					whole(hrRef, "RefConfigMaps.Forget"),
				}},
				twin: side{parts: []part{
					stmts(twinWebApp, "WebAppReconciler.Reconcile", "r.reconcileChildren(", "r.updateStatus("),
					stmts(twinWebApp, "WebAppReconciler.reconcileChildren", "", "var children []child"),
					whole(twinWebApp, "WebAppReconciler.referencedConfigMap"),
					whole(twinWebApp, "WebAppReconciler.rememberRef"),
				}},
			},
			{
				title: "7. The desired children",
				does:  "The apply configuration of each child: the ConfigMap when spec.config has entries, the Service, the Deployment.",
				handroll: side{parts: []part{
					whole(hrRec, "child"),
					whole(hrRec, "Reconciler.children"),
				}},
				twin: side{parts: []part{
					whole(twinWebApp, "child"),
					stmts(twinWebApp, "WebAppReconciler.reconcileChildren", "var children []child", "for _, c := range children"),
				}},
			},
			{
				title: "8. Apply each child",
				does:  "Read each child, leave alone one the WebApp does not control, skip one that already holds the desired state, else apply it server-side; an event says what was applied. handroll's apply carries a precondition the API server checks (the name free, or the object the cache showed), so a cache that lags cannot make it write over another's object.",
				handroll: side{parts: []part{
					stmts(hrRec, "Reconciler.reconcileChildren", "in := inputsOf(", "len(w.Spec.Config) == 0"),
					whole(hrRec, "Reconciler.observe"),
					whole(hrRec, "refused"),
					whole(hrRec, "conflictError"),
					whole(hrRec, "conflictError.Error"),
					whole(hrRec, "Reconciler.ensure"),
					whole(hrRec, "Reconciler.write"),
					whole(hrRec, "Reconciler.recheck"),
					whole(hrRec, "controlledBy"),
					whole(hrRec, "conflictOf"),
					whole(hrRec, "precondition"),
					whole(hrRec, "absentVersion"),
					whole(hrRec, "precondition.on"),
					whole(hrRec, "Reconciler.unlabelled"),
					whole(hrRec, "Reconciler.recordApplied"),
				}},
				twin: side{parts: []part{
					stmts(twinWebApp, "WebAppReconciler.reconcileChildren", "for _, c := range children", "len(w.Spec.Config) == 0"),
					whole(twinWebApp, "errNotControlled"),
					whole(twinWebApp, "WebAppReconciler.ensure"),
					whole(twinWebApp, "convert"),
				}},
			},
			{
				title: "9. Delete the spec.config ConfigMap",
				does:  "When spec.config is emptied, delete the ConfigMap rendered from it, if the WebApp controls it.",
				handroll: side{parts: []part{
					stmts(hrRec, "Reconciler.reconcileChildren", "len(w.Spec.Config) == 0", ""),
					whole(hrRec, "Reconciler.deleteOwnedConfigMap"),
				}},
				twin: side{parts: []part{
					stmts(twinWebApp, "WebAppReconciler.reconcileChildren", "len(w.Spec.Config) == 0", ""),
					whole(twinWebApp, "WebAppReconciler.deleteOwnedConfigMap"),
				}},
			},
			{
				title: "10. Status",
				does:  "Apply the computed status to the status subresource only when it changed; an event when Ready flips.",
				handroll: side{parts: []part{
					stmts(hrRec, "Reconciler.Reconcile", "r.updateStatus(", "obs.ApplyFailed"),
					whole(hrRec, "Reconciler.updateStatus"),
					whole(hrRec, "statusApplyConfiguration"),
				}},
				twin: side{parts: []part{
					stmts(twinWebApp, "WebAppReconciler.Reconcile", "r.updateStatus(", "obs.ApplyFailed"),
					whole(twinWebApp, "WebAppReconciler.updateStatus"),
				}},
			},
			{
				title:    "11. The result",
				does:     "A child the API server refused, or a name another object holds, ends the reconcile in an error, so that it is retried with backoff.",
				handroll: side{parts: []part{stmts(hrRec, "Reconciler.Reconcile", "obs.ApplyFailed", "")}},
				twin:     side{parts: []part{stmts(twinWebApp, "WebAppReconciler.Reconcile", "obs.ApplyFailed", "")}},
			},
			{
				title: "12. Watches and index",
				does:  "What wakes the reconciler: its WebApp, the children it owns, and the ConfigMaps WebApps reference, found through an index.",
				handroll: side{parts: []part{
					whole(hrCtl, "AddIndexers"),
					whole(hrCtl, "Informers"),
					whole(hrCtl, "NewController"),
					whole(hrCtl, "hasLegacyFinalizer"),
					whole(hrWritten, "justWritten.observe"),
				}},
				twin: side{parts: []part{
					whole(twinWebApp, "WebAppReconciler.SetupWithManager"),
					whole(twinWebApp, "configMapMetadata"),
					whole(twinWebApp, "WebAppReconciler.webAppsReferencing"),
				}},
			},
		},
	},
}
