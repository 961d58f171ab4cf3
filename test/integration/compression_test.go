package integration

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// gzipSeen records whether an answer to a watch came gzipped: Go's
// transport asks for gzip itself unless told not to, and then unzips the
// body and says so in Response.Uncompressed.
type gzipSeen struct {
	next http.RoundTripper

	mu     sync.Mutex
	gzip   bool
	answer bool
}

func (g *gzipSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := g.next.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" {
		g.mu.Lock()
		g.answer, g.gzip = true, resp.Uncompressed || resp.Header.Get("Content-Encoding") == "gzip"
		g.mu.Unlock()
	}
	return resp, err
}

// TestWatchListIsGzippedWhenAsked: the premise of handroll's
// --kube-api-compression=false. An informer's watch is a watch-list
// (client-go's WatchListClient): the same stream carries the initial
// objects and then every event for as long as the informer runs. The API
// server gzips that whole stream for a client that asks, as Go's transport
// does by default, and not for one whose rest.Config disables compression.
func TestWatchListIsGzippedWhenAsked(t *testing.T) {
	ns := env.Namespace(t)
	ctx := testContext(t)
	setup, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Enough that a list would be compressed too (over 128 KiB).
	for _, name := range []string{"a", "b", "c"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"k": strings.Repeat("handroll ", 7000)}}
		if _, err := setup.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, disable := range []bool{false, true} {
		cfg := rest.CopyConfig(env.Config)
		cfg.DisableCompression = disable
		seen := &gzipSeen{}
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { seen.next = rt; return seen })
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{
			SendInitialEvents: ptr.To(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
		})
		if err != nil {
			t.Fatalf("watch-list, DisableCompression %v: %v", disable, err)
		}
		added := 0
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added {
				added++
			}
			if m, ok := ev.Object.(metav1.Object); ok && ev.Type == watch.Bookmark && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				break
			}
		}
		w.Stop()
		seen.mu.Lock()
		answer, gzip := seen.answer, seen.gzip
		seen.mu.Unlock()
		if !answer || added < 3 {
			t.Fatalf("DisableCompression %v: saw the answer %v, %d objects added", disable, answer, added)
		}
		if gzip == disable {
			t.Errorf("DisableCompression %v: the watch-list stream came gzipped: %v", disable, gzip)
		}
	}
}
