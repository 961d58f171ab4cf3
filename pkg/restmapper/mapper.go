package restmapper

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
)

const (
	// DefaultRefreshRate and DefaultRefreshBurst are the default refresh
	// limit: controller-runtime's dynamic RESTMapper used the same numbers
	// while it had a limiter (5 refreshes a second, 5 at once).
	DefaultRefreshRate  rate.Limit = 5
	DefaultRefreshBurst int        = 5

	// DefaultMaxAge is how long fetched discovery data answers lookups
	// before the next lookup that uses it fetches it again. It bounds how
	// long a deleted CRD keeps mapping; a new CRD does not wait for it (a
	// miss refreshes at once).
	DefaultMaxAge = 10 * time.Minute
)

// Options tune a Mapper. The zero value gives the defaults.
type Options struct {
	// RefreshLimiter paces the requests that ask discovery again for
	// something already fetched: after a miss, or when data is older than
	// MaxAge. A refused refresh is not waited for: the lookup answers from
	// what it has. Nil means rate.NewLimiter(DefaultRefreshRate,
	// DefaultRefreshBurst). Share one limiter between mappers to limit
	// them together.
	RefreshLimiter *rate.Limiter

	// MaxAge is how long fetched data is used before it is fetched again.
	// Zero means DefaultMaxAge; a negative value means never (only misses
	// and Reset refresh).
	MaxAge time.Duration

	// Clock tells the age of fetched data; nil means the real clock. Tests
	// set a fake one.
	Clock clock.PassiveClock
}

// Mapper is a meta.RESTMapper that discovers lazily, one group-version at a
// time, and refreshes on a miss. It is safe for concurrent use. Make one with
// New.
type Mapper struct {
	client  discovery.DiscoveryInterface
	limiter *rate.Limiter
	maxAge  time.Duration
	clock   clock.PassiveClock

	// mu guards the fields below. Published *groupList and *groupVersion
	// values are never modified, so a lookup can keep using what it read
	// after unlocking; an update publishes new values.
	mu sync.RWMutex
	// gen counts updates. Each fetched piece of data is stamped with it, so
	// a refresh can tell that the data a miss saw has been replaced since.
	gen    uint64
	groups *groupList // nil until first fetched
	gvs    map[schema.GroupVersion]*groupVersion

	// flights are the fetches under way, so that concurrent callers that
	// need the same fetch wait for one instead of each making their own.
	flightMu sync.Mutex
	flights  map[flightKey]*flight
}

var (
	_ meta.RESTMapper           = (*Mapper)(nil)
	_ meta.ResettableRESTMapper = (*Mapper)(nil)
)

// New returns a Mapper that asks client. It makes no request: the first
// lookup does.
func New(client discovery.DiscoveryInterface, opts Options) (*Mapper, error) {
	if client == nil {
		return nil, errors.New("restmapper: a discovery client is required")
	}
	// A DiscoveryClient asks for the aggregated format, whose group list
	// also carries every resource of every group: the very download a lazy
	// mapper exists to avoid. The plain format lists groups and versions
	// only. (Other implementations, such as the cached or fake clients, are
	// used as given.)
	if dc, ok := client.(*discovery.DiscoveryClient); ok {
		client = dc.WithLegacy()
	}
	m := &Mapper{
		client:  client,
		limiter: opts.RefreshLimiter,
		maxAge:  opts.MaxAge,
		clock:   opts.Clock,
		gvs:     map[schema.GroupVersion]*groupVersion{},
		flights: map[flightKey]*flight{},
	}
	if m.limiter == nil {
		m.limiter = rate.NewLimiter(DefaultRefreshRate, DefaultRefreshBurst)
	}
	if m.maxAge == 0 {
		m.maxAge = DefaultMaxAge
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	return m, nil
}

// RESTMapping returns the mapping for kind gk in the first of versions the
// server serves it in; with no versions, in the group's preferred version,
// else the first other version that has it.
func (m *Mapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	var buf [1]*resource
	found, err := m.kinds(gk, versions, false, buf[:0])
	if err != nil {
		return nil, err
	}
	mapping := found[0].mapping // a copy: the caller may modify it
	return &mapping, nil
}

// RESTMappings returns a mapping for each of versions (all the server's
// versions, preferred first, when none are given) that serves kind gk.
func (m *Mapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	found, err := m.kinds(gk, versions, true, nil)
	if err != nil {
		return nil, err
	}
	mappings := make([]*meta.RESTMapping, len(found))
	for i, r := range found {
		mapping := r.mapping
		mappings[i] = &mapping
	}
	return mappings, nil
}

// KindFor returns the kind served as resource input (plural, singular or
// short name); with no version, in the group's preferred version that has
// it.
func (m *Mapper) KindFor(input schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	var buf [1]*resource
	found, err := m.resources(input, false, buf[:0])
	if err != nil {
		return schema.GroupVersionKind{}, err
	}
	return found[0].mapping.GroupVersionKind, nil
}

// KindsFor returns the kind served as resource input in each version that
// has it, preferred version first.
func (m *Mapper) KindsFor(input schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	found, err := m.resources(input, true, nil)
	if err != nil {
		return nil, err
	}
	kinds := make([]schema.GroupVersionKind, len(found))
	for i, r := range found {
		kinds[i] = r.mapping.GroupVersionKind
	}
	return kinds, nil
}

// ResourceFor returns the full (plural) resource for a partial one; with no
// version, in the group's preferred version that has it.
func (m *Mapper) ResourceFor(input schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	var buf [1]*resource
	found, err := m.resources(input, false, buf[:0])
	if err != nil {
		return schema.GroupVersionResource{}, err
	}
	return found[0].mapping.Resource, nil
}

// ResourcesFor returns the full resource for a partial one in each version
// that has it, preferred version first.
func (m *Mapper) ResourcesFor(input schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	found, err := m.resources(input, true, nil)
	if err != nil {
		return nil, err
	}
	gvrs := make([]schema.GroupVersionResource, len(found))
	for i, r := range found {
		gvrs[i] = r.mapping.Resource
	}
	return gvrs, nil
}

// ResourceSingularizer returns the singular name of a resource given by
// plural, singular or short name ("webapps", "wa" → "webapp"). The name
// carries no group, so it is looked for in what is already fetched, then in
// the core group. On error it returns input unchanged, as client-go's
// mappers do.
func (m *Mapper) ResourceSingularizer(input string) (string, error) {
	name := strings.ToLower(input)
	singular, err := m.fetchedSingular(name)
	if err != nil {
		return input, err
	}
	if singular != "" {
		return singular, nil
	}
	var buf [1]*resource
	found, err := m.find("", nil, false, match{name: name}, buf[:0])
	if err != nil {
		return input, err
	}
	if len(found) == 0 {
		return input, &meta.NoResourceMatchError{PartialResource: schema.GroupVersionResource{Resource: input}}
	}
	return found[0].singular, nil
}

// fetchedSingular looks name up in every group-version fetched so far. It
// fails if two of them disagree on the singular, as client-go's mappers do.
func (m *Mapper) fetchedSingular(name string) (string, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var singular string
	var where []schema.GroupVersionResource
	for _, gv := range m.gvs {
		r := gv.byName[name]
		if r == nil {
			continue
		}
		where = append(where, r.mapping.Resource)
		switch {
		case singular == "":
			singular = r.singular
		case singular != r.singular:
			return "", fmt.Errorf("restmapper: multiple possible singular resources %v found for %q", where, name)
		}
	}
	return singular, nil
}

// Reset forgets everything fetched; the next lookups fetch again. It makes
// the Mapper a meta.ResettableRESTMapper, for callers that know discovery
// changed (meta.MaybeResetRESTMapper).
func (m *Mapper) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	m.groups = nil
	m.gvs = map[schema.GroupVersion]*groupVersion{}
}

// kinds finds kind gk for RESTMapping(s), or returns a NoKindMatchError.
func (m *Mapper) kinds(gk schema.GroupKind, versions []string, all bool, buf []*resource) ([]*resource, error) {
	// The error gets a copy of versions: holding on to the caller's
	// variadic slice would make every call allocate it.
	if gk.Kind == "" {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: slices.Clone(versions)}
	}
	found, err := m.find(gk.Group, requested(versions), all, match{kind: gk.Kind}, buf)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: slices.Clone(versions)}
	}
	return found, nil
}

// resources finds a partial resource for KindFor, ResourceFor and their
// plurals, or returns a NoResourceMatchError.
func (m *Mapper) resources(input schema.GroupVersionResource, all bool, buf []*resource) ([]*resource, error) {
	name := strings.ToLower(input.Resource)
	if name == "" {
		return nil, fmt.Errorf("restmapper: a resource must be present, got: %v", input)
	}
	// A subresource ("deployments/scale") is reached through its parent and
	// is never a mapping of its own: no need to ask discovery.
	if strings.Contains(name, "/") {
		return nil, &meta.NoResourceMatchError{PartialResource: input}
	}
	var versions []string
	if v := input.Version; v != "" && v != runtime.APIVersionInternal {
		versions = []string{v}
	}
	found, err := m.find(input.Group, versions, all, match{name: name}, buf)
	if err != nil {
		return nil, err
	}
	if len(found) == 0 {
		return nil, &meta.NoResourceMatchError{PartialResource: input}
	}
	return found, nil
}

// requested drops the versions that name no served version: "" (callers
// pass the version of an object that had none) and the internal version.
func requested(versions []string) []string {
	for i, v := range versions {
		if v == "" || v == runtime.APIVersionInternal {
			out := append([]string(nil), versions[:i]...)
			for _, v := range versions[i+1:] {
				if v != "" && v != runtime.APIVersionInternal {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return versions
}
