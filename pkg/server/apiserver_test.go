package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestAPIServerCheck(t *testing.T) {
	var (
		calls  atomic.Int32
		status atomic.Int32
	)
	status.Store(http.StatusOK)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		if code := int(status.Load()); code != http.StatusOK {
			w.WriteHeader(code)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"))
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	defer api.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	client := kube.Discovery().RESTClient()
	probe, _ := http.NewRequest(http.MethodGet, "/readyz", nil)

	// One interval: many probes, one request.
	check := APIServerCheck(client, time.Hour, time.Second)
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if err := check.Check(probe); err != nil {
				t.Errorf("healthy API server: %v", err)
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("20 probes within one interval made %d requests, want 1", n)
	}

	// Each probe after the interval asks again, and reports the failed checks.
	check = APIServerCheck(client, 0, time.Second)
	status.Store(http.StatusInternalServerError)
	if err := check.Check(probe); err == nil || !strings.Contains(err.Error(), "HTTP 500") || !strings.Contains(err.Error(), "etcd failed") {
		t.Errorf("API server without etcd: got %v, want HTTP 500 naming etcd", err)
	}
	status.Store(http.StatusOK)
	if err := check.Check(probe); err != nil {
		t.Errorf("after recovery: %v", err)
	}

	// Nobody listening.
	api.Close()
	if err := check.Check(probe); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("API server down: got %v, want \"does not answer\"", err)
	}
}
