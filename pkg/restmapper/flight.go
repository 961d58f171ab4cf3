package restmapper

import "k8s.io/apimachinery/pkg/runtime/schema"

// flightKey names one kind of fetch: the group list, one group-version's
// resources, or the refresh of a group after a miss.
type flightKey struct {
	op op
	gv schema.GroupVersion // the group-version; for opRefresh, the group
}

type op uint8

const (
	opGroups op = iota
	opGroupVersion
	opRefresh
)

// flight is a fetch under way.
type flight struct {
	done    chan struct{} // closed when the fetch has returned
	err     error         // its result, set before done is closed
	waiters int           // callers waiting for it (under flightMu; tests read it)
}

// do runs fetch as the one fetch for key, unless newer reports that the data
// is already newer than what the caller saw (another caller fetched it in
// the meantime). A caller that finds a fetch for key under way waits for it,
// then checks newer again. A limited fetch needs a token from the limiter;
// without one do returns errRateLimited at once, without waiting.
//
// No lock is held while fetch runs. newer runs under flightMu, so that no
// fetch for key can start or end while it decides.
func (m *Mapper) do(key flightKey, newer func() bool, limited bool, fetch func() error) error {
	for {
		m.flightMu.Lock()
		if f := m.flights[key]; f != nil {
			f.waiters++
			m.flightMu.Unlock()
			<-f.done
			if f.err != nil {
				return f.err
			}
			continue
		}
		if newer() {
			m.flightMu.Unlock()
			return nil
		}
		if limited && !m.limiter.Allow() {
			m.flightMu.Unlock()
			return errRateLimited
		}
		f := &flight{done: make(chan struct{})}
		m.flights[key] = f
		m.flightMu.Unlock()

		f.err = fetch()

		m.flightMu.Lock()
		delete(m.flights, key)
		m.flightMu.Unlock()
		close(f.done)
		return f.err
	}
}

// groupListNewer reports whether the group list is newer than generation
// had.
func (m *Mapper) groupListNewer(had uint64) func() bool {
	return func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		return m.groups != nil && m.groups.gen > had
	}
}

// groupVersionNewer reports whether gv's resources are newer than
// generation had, or gv is known to be gone.
func (m *Mapper) groupVersionNewer(gv schema.GroupVersion, had uint64) func() bool {
	return func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if !m.groups.serves(gv) {
			return true
		}
		cur := m.gvs[gv]
		return cur != nil && cur.gen > had
	}
}

// groupNewer reports whether everything a refresh of group (for a lookup in
// versions) would fetch is already newer than generation seen.
func (m *Mapper) groupNewer(group string, versions []string, seen uint64) func() bool {
	return func() bool {
		m.mu.RLock()
		defer m.mu.RUnlock()
		if m.groups == nil || m.groups.gen <= seen {
			return false
		}
		for _, v := range m.groups.candidates(group, versions) {
			cur := m.gvs[schema.GroupVersion{Group: group, Version: v}]
			if cur == nil || cur.gen <= seen {
				return false
			}
		}
		return true
	}
}

// waiting returns how many callers wait for the fetch for key; tests use it
// to line callers up behind a fetch.
func (m *Mapper) waiting(key flightKey) int {
	m.flightMu.Lock()
	defer m.flightMu.Unlock()
	if f := m.flights[key]; f != nil {
		return f.waiters
	}
	return 0
}
