package restmapper

import (
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// errRateLimited is a refresh the limiter refused. It never reaches a
// caller: the lookup answers from the data it has.
var errRateLimited = errors.New("restmapper: discovery refresh rate-limited")

// find looks for q in group: in each of versions the server serves, or in
// each served version, preferred first, when versions is empty. It stops at
// the first match unless all is set, and fetches lazily, so a version after
// the match is never fetched. Matches are appended to found; none and no
// error is a no-match.
func (m *Mapper) find(group string, versions []string, all bool, q match, found []*resource) ([]*resource, error) {
	found, seen, err := m.findIn(group, versions, all, q, found)
	if err != nil || len(found) > 0 {
		return found, err
	}
	// A miss. The server may have learnt the kind since we last asked it
	// (a CRD installed after start): ask again about this group, if the
	// limiter allows, and look once more.
	refreshErr := m.refresh(group, versions, seen)
	if errors.Is(refreshErr, errRateLimited) {
		return found, nil
	}
	found, _, err = m.findIn(group, versions, all, q, found)
	if err == nil && len(found) == 0 && refreshErr != nil {
		err = refreshErr // nothing found, and discovery failed: say so
	}
	return found, err
}

// findIn is one pass of find over the data, fetching what is missing or
// too old. seen is the generation the pass started from: data stamped later
// was fetched during or after it.
func (m *Mapper) findIn(group string, versions []string, all bool, q match, found []*resource) (_ []*resource, seen uint64, _ error) {
	// The clock is read once per pass, and only if data can age: reading it
	// is a good part of what a lookup costs.
	var now time.Time
	if m.maxAge > 0 {
		now = m.clock.Now()
	}
	groups, seen, err := m.groupList(now)
	if err != nil {
		return found, seen, err
	}
	for _, v := range groups.candidates(group, versions) {
		gv, err := m.groupVersion(schema.GroupVersion{Group: group, Version: v}, now)
		if err != nil {
			return found, seen, err
		}
		if gv == nil {
			continue // the server no longer serves it
		}
		if r := q.in(gv); r != nil {
			found = append(found, r)
			if !all {
				break
			}
		}
	}
	return found, seen, nil
}

// groupList returns the group list, fetching it on first use, and again,
// rate-limited, once it is older than MaxAge (an old list still answers
// when the refresh is refused or fails). seen is the generation when it
// was read.
func (m *Mapper) groupList(now time.Time) (_ *groupList, seen uint64, _ error) {
	m.mu.RLock()
	groups, seen := m.groups, m.gen
	m.mu.RUnlock()
	if groups != nil && !m.old(groups.fetched, now) {
		return groups, seen, nil
	}
	var had uint64
	if groups != nil {
		had = groups.gen
	}
	err := m.do(flightKey{op: opGroups}, m.groupListNewer(had), groups != nil, m.fetchGroupList)
	m.mu.RLock()
	if m.groups != nil {
		groups = m.groups
	}
	m.mu.RUnlock()
	if groups == nil {
		return nil, seen, err
	}
	return groups, seen, nil
}

// groupVersion returns gv's resources, fetching them on first use and again,
// rate-limited, once they are older than MaxAge (old data still answers when
// the refresh is refused or fails). Nil means the server does not serve gv.
func (m *Mapper) groupVersion(gv schema.GroupVersion, now time.Time) (*groupVersion, error) {
	m.mu.RLock()
	cur := m.gvs[gv]
	m.mu.RUnlock()
	if cur != nil && !m.old(cur.fetched, now) {
		return cur, nil
	}
	var had uint64
	if cur != nil {
		had = cur.gen
	}
	err := m.do(flightKey{op: opGroupVersion, gv: gv}, m.groupVersionNewer(gv, had), cur != nil, func() error {
		return m.fetchGroupVersion(gv)
	})
	if err != nil {
		if cur != nil {
			return cur, nil
		}
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.gvs[gv], nil
}

// refresh asks discovery again about group after a lookup in it missed: the
// group list (did the group, or a version, appear or go?) and the group's
// versions the lookup tries. One token of the limiter pays for all of it.
// Lookups that miss in the same group meanwhile wait for this refresh
// rather than start their own; so do the ones that come after it, as long
// as what they saw is older than what it fetched.
func (m *Mapper) refresh(group string, versions []string, seen uint64) error {
	key := flightKey{op: opRefresh, gv: schema.GroupVersion{Group: group}}
	return m.do(key, m.groupNewer(group, versions, seen), true, func() error {
		err := m.do(flightKey{op: opGroups}, m.groupListNewer(seen), false, m.fetchGroupList)
		if err != nil {
			return err
		}
		m.mu.RLock()
		candidates := m.groups.candidates(group, versions)
		m.mu.RUnlock()
		var errs []error
		for _, v := range candidates {
			gv := schema.GroupVersion{Group: group, Version: v}
			err := m.do(flightKey{op: opGroupVersion, gv: gv}, m.groupVersionNewer(gv, seen), false, func() error {
				return m.fetchGroupVersion(gv)
			})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
}

// fetchGroupList fetches the group list and publishes it. Group-versions the
// server no longer lists are forgotten with their kinds.
func (m *Mapper) fetchGroupList() error {
	list, err := m.client.ServerGroups()
	if err != nil {
		return fmt.Errorf("restmapper: listing the server's API groups: %w", err)
	}
	groups := newGroupList(list)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	groups.gen, groups.fetched = m.gen, m.clock.Now()
	m.groups = groups
	for gv := range m.gvs {
		if !groups.serves(gv) {
			delete(m.gvs, gv)
		}
	}
	return nil
}

// fetchGroupVersion fetches gv's resources and publishes them. A 404 means
// the group list was out of date (a CRD, or one of its versions, was
// deleted): gv is forgotten, not an error.
func (m *Mapper) fetchGroupVersion(gv schema.GroupVersion) error {
	list, err := m.client.ServerResourcesForGroupVersion(gv.String())
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("restmapper: discovering the resources of %s: %w", gv, err)
	}
	var index *groupVersion
	if err == nil {
		index = newGroupVersion(gv, list)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	if index == nil {
		delete(m.gvs, gv)
		m.groups = m.groups.without(gv)
		return nil
	}
	index.gen, index.fetched = m.gen, m.clock.Now()
	m.gvs[gv] = index
	return nil
}

// old reports whether data fetched at t is past MaxAge at now.
func (m *Mapper) old(t, now time.Time) bool {
	return m.maxAge > 0 && now.Sub(t) > m.maxAge
}
