package restmapper

import (
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// fakeDiscovery serves a discovery document a test can change while the
// mapper runs, and counts the mapper's requests. client-go's
// discovery/fake derives preferred versions from the order of its lists and
// reads them without a lock, which rules out changing them under -race.
type fakeDiscovery struct {
	// The methods the mapper never calls: left nil, they would panic.
	discovery.DiscoveryInterface

	mu         sync.Mutex
	groups     []metav1.APIGroup
	resources  map[string][]metav1.APIResource // by group-version
	groupsErr  error
	gvErr      map[string]error
	groupCalls int
	gvCalls    map[string]int

	// Hooks run, outside mu, before a request is answered; tests block in
	// them to line up concurrent callers. call counts from 1.
	onGroups func(call int)
}

func newFake() *fakeDiscovery {
	return &fakeDiscovery{resources: map[string][]metav1.APIResource{}, gvErr: map[string]error{}, gvCalls: map[string]int{}}
}

func (f *fakeDiscovery) ServerGroups() (*metav1.APIGroupList, error) {
	f.mu.Lock()
	f.groupCalls++
	call, hook := f.groupCalls, f.onGroups
	f.mu.Unlock()
	if hook != nil {
		hook(call)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.groupsErr != nil {
		return nil, f.groupsErr
	}
	list := &metav1.APIGroupList{}
	for _, g := range f.groups {
		g.Versions = slices.Clone(g.Versions)
		list.Groups = append(list.Groups, g)
	}
	return list, nil
}

func (f *fakeDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gvCalls[gv]++
	if err := f.gvErr[gv]; err != nil {
		return nil, err
	}
	rs, ok := f.resources[gv]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
	}
	return &metav1.APIResourceList{GroupVersion: gv, APIResources: slices.Clone(rs)}, nil
}

// serve adds (or replaces) group-version gv with its resources; preferred
// makes it the group's preferred version.
func (f *fakeDiscovery) serve(gv schema.GroupVersion, preferred bool, rs ...metav1.APIResource) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resources[gv.String()] = rs
	entry := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
	i := slices.IndexFunc(f.groups, func(g metav1.APIGroup) bool { return g.Name == gv.Group })
	if i < 0 {
		f.groups = append(f.groups, metav1.APIGroup{Name: gv.Group})
		i = len(f.groups) - 1
	}
	g := &f.groups[i]
	if !slices.Contains(g.Versions, entry) {
		g.Versions = append(g.Versions, entry)
	}
	if preferred || g.PreferredVersion.Version == "" {
		g.PreferredVersion = entry
	}
}

// remove stops serving gv, as deleting a CRD (or one of its versions) does.
func (f *fakeDiscovery) remove(gv schema.GroupVersion) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.resources, gv.String())
	for i := range f.groups {
		g := &f.groups[i]
		if g.Name != gv.Group {
			continue
		}
		g.Versions = slices.DeleteFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == gv.Version })
		if g.PreferredVersion.Version == gv.Version && len(g.Versions) > 0 {
			g.PreferredVersion = g.Versions[0]
		}
	}
	f.groups = slices.DeleteFunc(f.groups, func(g metav1.APIGroup) bool { return len(g.Versions) == 0 })
}

func (f *fakeDiscovery) setGroupsErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.groupsErr = err
}

func (f *fakeDiscovery) setGVErr(gv string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.gvErr, gv)
		return
	}
	f.gvErr[gv] = err
}

func (f *fakeDiscovery) setOnGroups(hook func(call int)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.onGroups = hook
}

// calls returns how many times the group list, and each group-version, was
// asked for.
func (f *fakeDiscovery) calls() (groups int, gvs map[string]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	gvs = map[string]int{}
	for k, v := range f.gvCalls {
		gvs[k] = v
	}
	return f.groupCalls, gvs
}

func (f *fakeDiscovery) totalCalls() int {
	groups, gvs := f.calls()
	n := groups
	for _, c := range gvs {
		n += c
	}
	return n
}

// unavailable is what an aggregated API server that is down answers.
var unavailable = apierrors.NewServiceUnavailable("the server is currently unable to handle the request")

func res(name, singular, kind string, namespaced bool, shortNames ...string) metav1.APIResource {
	return metav1.APIResource{Name: name, SingularName: singular, Kind: kind, Namespaced: namespaced, ShortNames: shortNames,
		Verbs: metav1.Verbs{"get", "list"}}
}

var (
	coreV1          = schema.GroupVersion{Version: "v1"}
	appsV1          = schema.GroupVersion{Group: "apps", Version: "v1"}
	coordinationV1  = schema.GroupVersion{Group: "coordination.k8s.io", Version: "v1"}
	eventsV1        = schema.GroupVersion{Group: "events.k8s.io", Version: "v1"}
	rbacV1          = schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	handrollV1      = schema.GroupVersion{Group: "handroll.dev", Version: "v1"}
	handrollV1alpha = schema.GroupVersion{Group: "handroll.dev", Version: "v1alpha1"}
	oldV1           = schema.GroupVersion{Group: "old.example.com", Version: "v1"}
	lateV1          = schema.GroupVersion{Group: "late.example.com", Version: "v1"}
)

// standardFake serves a small cluster: a few built-in groups and handroll.dev
// with two versions, v1 preferred; v1alpha1 also has a kind v1 lacks.
func standardFake() *fakeDiscovery {
	f := newFake()
	f.serve(coreV1, true,
		res("pods", "pod", "Pod", true, "po"),
		res("pods/status", "", "Pod", true),
		res("pods/log", "", "Pod", true),
		res("configmaps", "configmap", "ConfigMap", true, "cm"),
		res("namespaces", "namespace", "Namespace", false, "ns"),
		res("events", "event", "Event", true, "ev"),
	)
	f.serve(appsV1, true,
		res("deployments", "deployment", "Deployment", true, "deploy"),
		metav1.APIResource{Name: "deployments/scale", Kind: "Scale", Group: "autoscaling", Version: "v1", Namespaced: true},
		res("deployments/status", "", "Deployment", true),
	)
	f.serve(coordinationV1, true, res("leases", "lease", "Lease", true))
	f.serve(eventsV1, true, res("events", "event", "Event", true, "ev"))
	f.serve(rbacV1, true, res("clusterroles", "clusterrole", "ClusterRole", false))
	f.serve(handrollV1, true,
		res("webapps", "webapp", "WebApp", true, "wa"),
		res("webapps/status", "", "WebApp", true),
		res("webapps/scale", "", "Scale", true),
	)
	f.serve(handrollV1alpha, false,
		res("webapps", "webapp", "WebApp", true, "wa"),
		res("legacyapps", "legacyapp", "LegacyApp", true),
	)
	// An aggregated API that lists no singular names, as older ones do.
	f.serve(oldV1, true, res("widgets", "", "Widget", false))
	return f
}

// describe shows an error and its type in failure messages.
func describe(err error) string {
	if err == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%T: %v", err, err)
}
