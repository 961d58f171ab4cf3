package manifests

// scope says where a permission is granted.
type scope string

const (
	// cluster: a ClusterRole bound by a ClusterRoleBinding; for namespaced
	// resources, in every namespace.
	cluster scope = "cluster"
	// operatorNamespace: a Role (or ClusterRole) bound by a RoleBinding in
	// the operator's namespace, handroll-system.
	operatorNamespace scope = "namespace handroll-system"
)

// need is one thing the operator asks of the API server, and why.
type need struct {
	Scope    scope
	APIGroup string
	// Resource is "resource" or "resource/subresource".
	Resource string
	Verbs    []string
	// ResourceNames limits the grant to these objects; empty: any.
	ResourceNames []string
	// Why names the file and function that makes the request.
	Why string
}

// operatorNeeds is every permission the operator's ServiceAccount must hold,
// and nothing more: TestRBACGrantsExactlyWhatTheCodeNeeds fails on a grant
// missing from manifests/rbac and on a grant there that is not listed here.
// A change to the requests the code makes changes this table in the same
// commit, with its reason.
var operatorNeeds = []need{
	// The WebApp controller: cluster-wide, as it watches every namespace
	// unless --namespaces says otherwise.
	{cluster, "handroll.dev", "webapps", []string{"list", "watch"}, nil,
		"pkg/cache/cache.go Caches.WebApps: the WebApp informers"},
	{cluster, "handroll.dev", "webapps", []string{"patch"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.removeLegacyFinalizer: a JSON patch strips the first version's directory finalizer"},
	{cluster, "handroll.dev", "webapps/status", []string{"patch"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.updateStatus: ApplyStatus"},
	{cluster, "handroll.dev", "webapps/finalizers", []string{"update"}, nil,
		"pkg/controller/webapp/desired.go ownerReference sets blockOwnerDeletion; where the OwnerReferencesPermissionEnforcement " +
			"admission plugin runs, applying such a child (Reconciler.ensure) requires update on the owner's finalizers"},

	{cluster, "apps", "deployments", []string{"list", "watch"}, nil,
		"pkg/cache/cache.go Caches.Deployments: informers filtered by managed-by=handroll; Caches.Metadata: every Deployment's metadata, " +
			"which Reconciler.unlabelled reads for a Deployment missing from the filtered cache"},
	{cluster, "apps", "deployments", []string{"get"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.recheck: a Deployment whose apply was refused on its precondition, read live to see whose it is"},
	{cluster, "apps", "deployments", []string{"create", "patch"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.ensure (child.apply): server-side apply, authorized as create when it creates"},

	{cluster, "", "services", []string{"list", "watch"}, nil,
		"pkg/cache/cache.go Caches.Services: informers filtered by managed-by=handroll; Caches.Metadata: every Service's metadata, " +
			"which Reconciler.unlabelled reads for a Service missing from the filtered cache"},
	{cluster, "", "services", []string{"get"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.recheck: a Service whose apply was refused on its precondition, read live to see whose it is"},
	{cluster, "", "services", []string{"create", "patch"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.ensure (child.apply): server-side apply, authorized as create when it creates"},

	{cluster, "", "configmaps", []string{"list", "watch"}, nil,
		"pkg/cache/cache.go Caches.ConfigMaps: those labelled managed-by=handroll (the operator namespace's too); Caches.Metadata: every ConfigMap's metadata"},
	{cluster, "", "configmaps", []string{"get"}, nil,
		"pkg/controller/webapp/refconfigmaps.go RefConfigMaps.Get: a ConfigMap named by spec.configMapRef, when its resourceVersion moves; " +
			"reconciler.go Reconciler.recheck: the rendered ConfigMap whose apply was refused on its precondition"},
	{cluster, "", "configmaps", []string{"create", "patch"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.ensure (server-side apply of <name>-config), and directory.go " +
			"DirectoryReconciler.create and .patch (the directory ConfigMap in the operator's namespace)"},
	{cluster, "", "configmaps", []string{"delete"}, nil,
		"pkg/controller/webapp/reconciler.go Reconciler.deleteOwnedConfigMap: once spec.config is emptied"},

	{cluster, "events.k8s.io", "events", []string{"create", "patch"}, nil,
		"cmd/handroll/start.go step 7 and events.go flushingSink: client-go's events broadcaster creates an Event, patches its series"},

	{cluster, "authentication.k8s.io", "tokenreviews", []string{"create"}, nil,
		"pkg/server/secure.go authorizer.review: --metrics-secure authenticates each scrape's token"},
	{cluster, "authorization.k8s.io", "subjectaccessreviews", []string{"create"}, nil,
		"pkg/server/secure.go authorizer.review: --metrics-secure authorizes get on /metrics for the scraper"},

	// Leader election, in the operator's namespace. Not limited by name:
	// --leader-elect-resource-name chooses it.
	{operatorNamespace, "coordination.k8s.io", "leases", []string{"get", "create", "update"}, nil,
		"pkg/leader/elector.go Elector.Run (client-go's LeaderElector through resourcelock.LeaseLock Get/Create/Update) and Elector.release"},
	// With --shards: one membership Lease per replica, listed by label and
	// deleted on a clean stop; the ranges' Leases are elected as above. A
	// single leader lists them too, to wait while sharded replicas run.
	{operatorNamespace, "coordination.k8s.io", "leases", []string{"list", "delete"}, nil,
		"pkg/shard/members.go Members.Live and Members.OtherSplits (list by label, also by a single leader before it reconciles: cmd/handroll/sharded.go waitForNoShards; delete the Leases of members long gone) and Members.Run (delete its own on a clean stop)"},

	// Self-managed webhook certificates, on every replica (pkg/certs;
	// not used with --webhook-cert-dir). The names are the defaults of
	// --webhook-secret-name, --webhook-configuration-name and
	// --conversion-crd.
	{operatorNamespace, "", "secrets", []string{"create"}, nil,
		"pkg/certs/manager.go Manager.syncSecret: creates the Secret when absent (create cannot be limited by name)"},
	{operatorNamespace, "", "secrets", []string{"list", "watch"}, []string{"handroll-webhook-tls"},
		"pkg/certs/manager.go New: a Secret informer with fieldSelector metadata.name=handroll-webhook-tls, authorized by name"},
	{operatorNamespace, "", "secrets", []string{"get", "update"}, []string{"handroll-webhook-tls"},
		"pkg/certs/manager.go Manager.syncSecret (update, get after a conflict) and Manager.inject (get before writing a bundle)"},
	// The CA bundle published for Prometheus (--metrics-ca-configmap), in
	// the operator's namespace only: the ClusterRole's configmaps grants
	// are the WebApp controller's, which --namespaces may one day narrow.
	{operatorNamespace, "", "configmaps", []string{"create"}, nil,
		"pkg/certs/publish.go Manager.syncCAConfigMap: creates the ConfigMap handroll-ca when absent (create cannot be limited by name)"},
	{operatorNamespace, "", "configmaps", []string{"get", "update"}, []string{"handroll-ca"},
		"pkg/certs/publish.go Manager.syncCAConfigMap: writes the CA bundle into ca.crt, read first and updated with its resourceVersion"},
	{cluster, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", []string{"get", "update"}, []string{"handroll"},
		"pkg/certs/inject.go Manager.syncMutating: injects the CA bundle into manifests/webhook's configuration"},
	{cluster, "admissionregistration.k8s.io", "validatingwebhookconfigurations", []string{"get", "update"}, []string{"handroll"},
		"pkg/certs/inject.go Manager.syncValidating: injects the CA bundle into manifests/webhook's configuration"},
	{cluster, "apiextensions.k8s.io", "customresourcedefinitions", []string{"get", "update"}, []string{"webapps.handroll.dev"},
		"pkg/certs/inject.go Manager.syncCRD: injects the CA bundle into the WebApp CRD's conversion webhook"},
}

// othersNeed lists the ClusterRoles manifests/rbac defines for someone other
// than the operator to bind, with exactly the grants each gives and the
// Kubernetes roles (admin, edit, view) it is aggregated into.
var othersNeed = map[string]othersRole{
	"handroll-metrics-reader": {
		Grants: []othersGrant{{"", "/metrics", []string{"get"}}},
		Why: "whoever scrapes /metrics under --metrics-secure: pkg/server/secure.go authorizer.review asks a SubjectAccessReview for get /metrics " +
			"(manifests/monitoring binds it to its scraper ServiceAccount, the chart to metrics.reader.subjects)",
	},

	// The roles for users, kubebuilder's <kind>_admin/editor/viewer_role.
	// Nobody writes webapps/status: it is the operator's report
	// (Reconciler.updateStatus), overwritten by its next reconcile.
	// webapps/scale as Kubernetes' own roles grant deployments/scale:
	// kubectl scale works for whoever may change spec.replicas.
	// test/roles checks the same table with kubectl auth can-i.
	"webapp-admin": {
		Grants: []othersGrant{
			{"handroll.dev", "webapps", []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}},
			{"handroll.dev", "webapps/status", []string{"get"}},
			{"handroll.dev", "webapps/scale", []string{"get", "patch", "update"}},
		},
		AggregateTo: []string{"admin"},
		Why:         "namespace admins: every verb on WebApps, deletecollection included",
	},
	"webapp-editor": {
		Grants: []othersGrant{
			{"handroll.dev", "webapps", []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
			{"handroll.dev", "webapps/status", []string{"get"}},
			{"handroll.dev", "webapps/scale", []string{"get", "patch", "update"}},
		},
		AggregateTo: []string{"edit"},
		Why:         "namespace editors: create, change and delete WebApps one by one; no deletecollection (kubebuilder's editor role)",
	},
	"webapp-viewer": {
		Grants: []othersGrant{
			{"handroll.dev", "webapps", []string{"get", "list", "watch"}},
			{"handroll.dev", "webapps/status", []string{"get"}},
			{"handroll.dev", "webapps/scale", []string{"get"}},
		},
		AggregateTo: []string{"view"},
		Why:         "namespace viewers: read WebApps",
	},
}

// othersRole is one entry of othersNeed.
type othersRole struct {
	Grants []othersGrant
	// AggregateTo names the Kubernetes ClusterRoles (admin, edit, view)
	// whose rbac.authorization.k8s.io/aggregate-to-<name> label the role
	// carries; none other may be set.
	AggregateTo []string
	Why         string
}

// othersGrant is a rule: Resource is "resource[/subresource]" of APIGroup,
// or a non-resource URL ("/...") with APIGroup "".
type othersGrant struct {
	APIGroup string
	Resource string
	Verbs    []string
}

func (r othersRole) grants() []grant {
	var out []grant
	for _, g := range r.Grants {
		for _, v := range g.Verbs {
			out = append(out, grant{cluster, g.APIGroup, g.Resource, v, ""})
		}
	}
	return out
}
