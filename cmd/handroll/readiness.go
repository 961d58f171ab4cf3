package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	handrollcache "github.com/handroll/handroll/pkg/cache"
	"github.com/handroll/handroll/pkg/server"
)

// addReadiness is step 6's part of /readyz. The rule of readiness, for
// every replica, leader or standby, sharded or not: /readyz is the
// conjunction of the counted checks, and only these are counted
// (TestReadinessIsTheConjunctionOfItsCountedChecks):
//
//   - ping: the probe server answers (here);
//   - webhook-certificate, when the webhooks are served: the serving
//     certificate is loaded (webhookServer);
//   - informer-sync: here a stand-in that fails, so that a replica is not
//     ready before its caches exist; step 8 puts the caches' check in its
//     place, the single leader's (leaderSyncCheck) or a sharded replica's
//     (heldCaches.addChecks). It does not wait for an informer blocked only
//     on the conversion webhook, which the API server reaches only through
//     ready replicas.
//
// What is the same for every replica, or waits on this one being ready,
// is reported (/readyz?verbose, /readyz/<name>) and never counted:
// api-server, informer-sync-conversion, range-informer-sync. Counting it
// would take every replica out of the webhook Service at once.
func addReadiness(health *server.Health) {
	health.AddReadinessCheck(server.Ping)
	health.AddReadinessCheck(server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		return errors.New("the caches have not been made yet")
	}})
}

// leaderSyncCheck is the single leader's readiness check on its caches,
// counted only while counts says so: a cold standby has none to wait for.
//
// A replica that serves the webhooks does not wait for an informer whose
// list fails only because the API server cannot call handroll's
// conversion webhook (objects stored at v1alpha1, every replica restarted
// at once): the API server reaches that webhook through the Service, which
// publishes only ready replicas, so waiting would be a deadlock, each
// replica unready until a replica is ready. Once ready, it is published,
// the conversion is served, and the informer's next list (client-go
// retries at most a minute apart) fills the cache within step 10's
// --cache-sync-timeout; the controllers start only after that, as ever.
func leaderSyncCheck(caches *handrollcache.Caches, servesConversion bool, counts func() bool) server.Check {
	unsynced := caches.Unsynced
	if servesConversion {
		unsynced = caches.UnsyncedExceptConversion
	}
	var logged sync.Once
	return server.Check{Name: "informer-sync", Check: func(*http.Request) error {
		if !counts() {
			return nil
		}
		// Names only: why (a forbidden list, say) is in the log and in
		// step 10's error, not on a port anyone in the cluster can probe.
		if unsynced := unsynced(); len(unsynced) > 0 {
			return fmt.Errorf("not synced: %s", strings.Join(unsynced, ", "))
		}
		if servesConversion {
			if waiting := caches.AwaitingConversion(); len(waiting) > 0 {
				logged.Do(func() {
					klog.InfoS("Ready before these caches sync: their lists need the WebApp conversion webhook, which the API server reaches only once a replica is ready",
						"informers", waiting)
				})
			}
		}
		return nil
	}}
}

// conversionReport is /readyz?verbose's account of the informers that
// leaderSyncCheck does not wait for: reported, not counted.
func conversionReport(caches *handrollcache.Caches) server.Check {
	return server.Check{Name: "informer-sync-conversion", Check: func(*http.Request) error {
		if waiting := caches.AwaitingConversion(); len(waiting) > 0 {
			return fmt.Errorf("waiting for the API server to reach the conversion webhook, not counted in informer-sync: %s", strings.Join(waiting, ", "))
		}
		return nil
	}}
}
