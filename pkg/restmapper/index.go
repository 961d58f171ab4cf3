package restmapper

import (
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// groupList is the server's groups and their versions, as of one fetch.
type groupList struct {
	versions map[string][]string // group → served versions, preferred first
	gen      uint64
	fetched  time.Time
}

func newGroupList(list *metav1.APIGroupList) *groupList {
	gl := &groupList{versions: map[string][]string{}}
	if list == nil {
		return gl
	}
	for _, g := range list.Groups {
		// The preferred version first: it answers lookups that name no
		// version, and when several versions have a kind, it wins.
		var versions []string
		if p := g.PreferredVersion.Version; p != "" {
			versions = append(versions, p)
		}
		for _, v := range g.Versions {
			if !slices.Contains(versions, v.Version) {
				versions = append(versions, v.Version)
			}
		}
		gl.versions[g.Name] = versions
	}
	return gl
}

// serves reports whether the list has gv.
func (gl *groupList) serves(gv schema.GroupVersion) bool {
	return gl != nil && slices.Contains(gl.versions[gv.Group], gv.Version)
}

// without returns a copy of gl without gv, for when the server answered that
// it no longer serves gv although the list still had it.
func (gl *groupList) without(gv schema.GroupVersion) *groupList {
	if !gl.serves(gv) {
		return gl
	}
	out := &groupList{versions: make(map[string][]string, len(gl.versions)), gen: gl.gen, fetched: gl.fetched}
	for g, vs := range gl.versions {
		if g == gv.Group {
			vs = slices.DeleteFunc(slices.Clone(vs), func(v string) bool { return v == gv.Version })
			if len(vs) == 0 {
				continue
			}
		}
		out.versions[g] = vs
	}
	return out
}

// candidates are the versions of group a lookup tries, in order: the
// requested ones the server serves, or else every served one, preferred
// first.
func (gl *groupList) candidates(group string, requested []string) []string {
	if gl == nil {
		return nil
	}
	served := gl.versions[group]
	if len(requested) == 0 {
		return served
	}
	if len(requested) == 1 { // the usual case: the version of an object
		if slices.Contains(served, requested[0]) {
			return requested
		}
		return nil
	}
	var out []string
	for _, v := range requested {
		if slices.Contains(served, v) && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// groupVersion is one group-version's resources, as of one fetch, indexed
// for lookups.
type groupVersion struct {
	byKind  map[string]*resource
	byName  map[string]*resource // plural, singular and short names, lower case
	gen     uint64
	fetched time.Time
}

// resource is one resource of a group-version.
type resource struct {
	mapping    meta.RESTMapping
	singular   string
	shortNames []string
}

func newGroupVersion(gv schema.GroupVersion, list *metav1.APIResourceList) *groupVersion {
	index := &groupVersion{byKind: map[string]*resource{}, byName: map[string]*resource{}}
	if list == nil {
		return index
	}
	var all []*resource
	for _, r := range list.APIResources {
		// A subresource (deployments/status, deployments/scale) is reached
		// through its parent; its kind (Scale) is not a mapping of its own.
		if strings.Contains(r.Name, "/") || r.Kind == "" {
			continue
		}
		scope := meta.RESTScopeRoot
		if r.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		singular := strings.ToLower(r.SingularName)
		if singular == "" {
			// Older servers and some aggregated APIs leave it out; guess
			// it as client-go does.
			_, guess := meta.UnsafeGuessKindToResource(gv.WithKind(r.Kind))
			singular = guess.Resource
		}
		res := &resource{
			mapping: meta.RESTMapping{
				Resource:         gv.WithResource(r.Name),
				GroupVersionKind: gv.WithKind(r.Kind),
				Scope:            scope,
			},
			singular:   singular,
			shortNames: r.ShortNames,
		}
		all = append(all, res)
		if _, taken := index.byKind[r.Kind]; !taken { // the first listed wins
			index.byKind[r.Kind] = res
		}
	}
	// Plurals first, then singulars, then short names, each kept only if the
	// name is free: a singular or short name never hides a plural.
	add := func(name string, r *resource) {
		name = strings.ToLower(name)
		if _, taken := index.byName[name]; !taken && name != "" {
			index.byName[name] = r
		}
	}
	for _, r := range all {
		add(r.mapping.Resource.Resource, r)
	}
	for _, r := range all {
		add(r.singular, r)
	}
	for _, r := range all {
		for _, short := range r.shortNames {
			add(short, r)
		}
	}
	return index
}

// match is what a lookup looks for in a group-version: a kind, or a
// resource name.
type match struct {
	kind string
	name string
}

func (q match) in(gv *groupVersion) *resource {
	if q.kind != "" {
		return gv.byKind[q.kind]
	}
	return gv.byName[q.name]
}
