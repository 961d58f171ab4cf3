package restmapper

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	clientgomapper "k8s.io/client-go/restmapper"

	handrollmapper "github.com/handroll/handroll/pkg/restmapper"
)

// BenchmarkRESTMapping measures this mapper against client-go's
// DeferredDiscoveryRESTMapper over a memory-cached discovery client, on the
// same API server in the same run:
//
//   - cold: a new discovery client and mapper, then the first RESTMapping
//     of a WebApp: discovery round trips included, as when a process starts
//     or a mapper is built per request;
//   - warm: RESTMapping of four kinds in turn on a mapper that has them.
//
// Besides time and allocations it reports the discovery requests and the
// response bytes (after decompression) per operation.
//
//	KUBEBUILDER_ASSETS=... go test -run '^$' -bench . -benchmem ./test/restmapper/
func BenchmarkRESTMapping(b *testing.B) {
	testContext(b)
	c := newCounter()
	cfg := c.config()
	// One HTTP client for every discovery client: connections are reused,
	// so a cold operation costs its requests, not a TLS handshake.
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		b.Fatal(err)
	}
	newDiscovery := func(b *testing.B) *discovery.DiscoveryClient {
		dc, err := discovery.NewDiscoveryClientForConfigAndClient(cfg, httpClient)
		if err != nil {
			b.Fatal(err)
		}
		return dc
	}
	mappers := []struct {
		name string
		new  func(*testing.B, *discovery.DiscoveryClient) meta.RESTMapper
	}{
		{"handroll", func(b *testing.B, dc *discovery.DiscoveryClient) meta.RESTMapper {
			m, err := handrollmapper.New(dc, handrollmapper.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return m
		}},
		{"client-go-deferred", func(_ *testing.B, dc *discovery.DiscoveryClient) meta.RESTMapper {
			return clientgomapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
		}},
	}
	report := func(b *testing.B, requests0 int, bytes0 int64) {
		requests, bytes := c.totals()
		b.ReportMetric(float64(requests-requests0)/float64(b.N), "requests/op")
		b.ReportMetric(float64(bytes-bytes0)/float64(b.N), "discovery-B/op")
	}

	for _, mapper := range mappers {
		b.Run("cold/"+mapper.name, func(b *testing.B) {
			requests0, bytes0 := c.totals()
			for b.Loop() {
				m := mapper.new(b, newDiscovery(b))
				if _, err := m.RESTMapping(webApp, "v1"); err != nil {
					b.Fatal(err)
				}
			}
			report(b, requests0, bytes0)
		})
	}

	kinds := builtinsAndWebApp[:4] // Deployment, ConfigMap, Lease, WebApp
	for _, mapper := range mappers {
		b.Run("warm/"+mapper.name, func(b *testing.B) {
			m := mapper.new(b, newDiscovery(b))
			for _, w := range kinds {
				if err := w.check(m); err != nil {
					b.Fatal(err)
				}
			}
			requests0, bytes0 := c.totals()
			i := 0
			for b.Loop() {
				gvk := kinds[i%len(kinds)].gvk
				i++
				if _, err := m.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
					b.Fatal(err)
				}
			}
			report(b, requests0, bytes0)
		})
	}
}
