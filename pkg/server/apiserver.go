package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerCheck returns a readiness check, named "api-server", that fails
// while the API server does not answer GET /readyz with 200: when it is
// down, unreachable, or cannot reach its storage (kube-apiserver's /readyz
// includes etcd). Every authenticated user may read /readyz
// (system:public-info-viewer).
//
// A probe asks the API server at most once per interval; probes in between,
// and probes arriving while a request is in flight, get the last answer. So
// however often the kubelet or a person probes, the API server sees at most
// one request per interval, and an idle operator that nobody probes sends
// none. Each request is bounded by timeout.
//
// client should have a rate limiter of its own: a probe must not queue
// behind the controllers' requests, nor take their budget.
func APIServerCheck(client rest.Interface, interval, timeout time.Duration) Check {
	c := &apiServerCheck{client: client, interval: interval, timeout: timeout}
	return Check{Name: "api-server", Check: c.check}
}

type apiServerCheck struct {
	client            rest.Interface
	interval, timeout time.Duration

	mu      sync.Mutex // held across the request: one in flight at a time
	checked time.Time
	last    error
}

func (c *apiServerCheck) check(r *http.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.checked.IsZero() && time.Since(c.checked) < c.interval {
		return c.last
	}
	// Not the probe's context: an answer that a hung-up prober no longer
	// waits for still serves the next one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), c.timeout)
	defer cancel()
	var code int
	body, err := c.client.Get().AbsPath("/readyz").Do(ctx).StatusCode(&code).Raw()
	switch {
	case err != nil && code != 0:
		c.last = fmt.Errorf("the API server is not ready (HTTP %d): %s", code, summarize(body, err))
	case err != nil:
		c.last = fmt.Errorf("the API server does not answer: %w", err)
	default:
		c.last = nil
	}
	c.checked = time.Now()
	return c.last
}

// summarize names the failed checks of a /readyz answer ("[-]etcd failed:
// ..."), or falls back to the error.
func summarize(body []byte, err error) string {
	var failed []string
	for line := range strings.SplitSeq(string(body), "\n") {
		if name, ok := strings.CutPrefix(line, "[-]"); ok {
			failed = append(failed, strings.TrimSpace(name))
		}
	}
	if len(failed) == 0 {
		return err.Error()
	}
	return strings.Join(failed, "; ")
}
