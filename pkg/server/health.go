package server

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Check is a named health check; nil means healthy.
type Check struct {
	Name  string
	Check func(*http.Request) error
}

// Ping always passes: it proves the process serves HTTP.
var Ping = Check{Name: "ping", Check: func(*http.Request) error { return nil }}

// Health serves /healthz and /livez (liveness) and /readyz (readiness), each
// with named checks, in the format of kube-apiserver's and controller-runtime's
// probes: "ok" or a list of failed checks; ?verbose lists every check;
// /readyz/<name> runs one; ?exclude=<name> skips one.
//
// It replaces the Manager's HealthProbeBindAddress, AddHealthzCheck and
// AddReadyzCheck.
type Health struct {
	mu        sync.RWMutex
	liveness  []Check
	readiness []Check
	reports   []Check
}

// AddLivenessCheck adds a check to /healthz and /livez.
func (h *Health) AddLivenessCheck(c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.liveness = append(h.liveness, c)
}

// AddReadinessCheck adds a check to /readyz.
func (h *Health) AddReadinessCheck(c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readiness = append(h.readiness, c)
}

// SetReadinessCheck puts c in place of the readiness check of the same
// name, or adds it: a check can stand in, failing, from the moment the
// probes are served until what it checks exists.
func (h *Health) SetReadinessCheck(c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	// A new slice: the handler may hold the old one.
	h.readiness = append(slices.DeleteFunc(slices.Clone(h.readiness), func(old Check) bool { return old.Name == c.Name }), c)
}

// AddReadinessReport adds a check that is reported but not counted: it is
// served at /readyz/<name> and listed by /readyz?verbose, and never fails
// /readyz. For a state worth seeing that must not take the replica out of
// its Service, such as the API server's own readiness: it is the same for
// every replica, so counting it would empty the Service all at once.
func (h *Health) AddReadinessReport(c Check) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reports = append(h.reports, c)
}

// Register installs the probe endpoints on mux.
func (h *Health) Register(mux *http.ServeMux) {
	live := func() ([]Check, []Check) { h.mu.RLock(); defer h.mu.RUnlock(); return h.liveness, nil }
	ready := func() ([]Check, []Check) { h.mu.RLock(); defer h.mu.RUnlock(); return h.readiness, h.reports }
	for _, path := range []string{"/healthz", "/livez"} {
		mux.Handle(path, checksHandler(path, live))
		mux.Handle(path+"/", checksHandler(path, live))
	}
	mux.Handle("/readyz", checksHandler("/readyz", ready))
	mux.Handle("/readyz/", checksHandler("/readyz", ready))
}

// checksHandler serves base from the counted checks and the reports that
// checks returns.
func checksHandler(base string, checks func() (counted, reports []Check)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		counted, reports := checks()
		all := append(slices.Clip(counted), reports...)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")

		// /readyz/<name>: that one check.
		if name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, base), "/"); name != "" {
			for _, c := range all {
				if c.Name == name {
					if err := c.Check(r); err != nil {
						http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
						return
					}
					fmt.Fprint(w, "ok")
					return
				}
			}
			http.Error(w, fmt.Sprintf("no check named %q", name), http.StatusNotFound)
			return
		}

		excluded := map[string]bool{}
		for _, name := range r.URL.Query()["exclude"] {
			excluded[name] = true
		}
		var report strings.Builder
		var failed []string
		for _, c := range counted {
			if excluded[c.Name] {
				fmt.Fprintf(&report, "[+]%s excluded: ok\n", c.Name)
				continue
			}
			if err := c.Check(r); err != nil {
				fmt.Fprintf(&report, "[-]%s failed: %v\n", c.Name, err)
				failed = append(failed, c.Name)
				continue
			}
			fmt.Fprintf(&report, "[+]%s ok\n", c.Name)
		}
		_, verbose := r.URL.Query()["verbose"]
		// Reports cost a request each; they are run only when listed.
		for _, c := range reports {
			if !verbose {
				break
			}
			if err := c.Check(r); err != nil {
				fmt.Fprintf(&report, "[-]%s failed (reported, not counted): %v\n", c.Name, err)
				continue
			}
			fmt.Fprintf(&report, "[+]%s ok (reported, not counted)\n", c.Name)
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "%s%s check failed: %s\n", report.String(), strings.TrimPrefix(base, "/"), strings.Join(failed, ", "))
			return
		}
		if verbose {
			fmt.Fprintf(w, "%s%s check passed\n", report.String(), strings.TrimPrefix(base, "/"))
			return
		}
		fmt.Fprint(w, "ok")
	}
}
