package upgrade

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/release"
)

// handOvers is how many times TestRestartRefusesNoWrite replaces one
// process by the next. A webhook call that meets a closing connection is a
// matter of timing, so one hand-over can pass by luck; several, each under
// writers that leave the API server's connections busy and idle in turn,
// do not.
const handOvers = 4

// TestRestartRefusesNoWrite replaces this tree's operator by itself, as a
// rolling update of the next release (or a `kubectl rollout restart`)
// does, while writers keep writing through the webhooks. Unlike the
// upgrade from an older release, nothing is excused: a webhook call the
// API server sent while a process stopped must reach a process that
// answers it.
func TestRestartRefusesNoWrite(t *testing.T) {
	if env == nil {
		t.Skip("needs the local control plane; not started under -short")
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "handroll-current")
	release.Build(t, root, bin)
	// The build is not the test's work: its budget starts after it.
	ctx, cancel := budget.Context(t, context.Background(), 10*time.Minute, "the restarts to refuse no write")
	defer cancel()

	kube, hc := env.KubeClient(t), env.HandrollClient(t)
	ext := apiextensionsclient.NewForConfigOrDie(env.Config)
	opNS := namespace(ctx, t, "handroll-system")
	certDir, caBundle, svc, url := newWebhookEndpoint(t)
	current := readManifests(t, root)
	current.applyCRDs(ctx, t, ext, url, caBundle)
	current.applyWebhooks(ctx, t, kube, url, caBundle)

	serving := startReplica(t, bin, opNS, certDir, svc)
	var writers []*release.Writer
	for i := range 3 {
		ns := namespace(ctx, t, fmt.Sprintf("restart-%d", i))
		w := &release.Writer{Client: hc, NS: ns, Names: release.CreateWritten(ctx, t, hc, ns, image, 2)}
		waitConverged(ctx, t, hc, kube, ns, w.Names)
		writers = append(writers, w)
	}
	wctx, stopWriters := context.WithCancel(ctx)
	defer stopWriters()
	done := make(chan struct{}, len(writers))
	for _, w := range writers {
		go func() { defer func() { done <- struct{}{} }(); w.Run(wctx, 10*time.Millisecond) }()
	}

	var stops []string
	for range handOvers {
		time.Sleep(2 * time.Second)
		next := startReplica(t, bin, opNS, certDir, svc)
		time.Sleep(overlap)
		svc.remove(serving.addr)
		stopped := time.Now()
		if err := serving.op.Stop(t, syscall.SIGTERM, 45*time.Second); err != nil {
			t.Errorf("the operator did not stop cleanly on SIGTERM: %v", err)
		}
		exited, _ := serving.op.ExitedAt()
		stops = append(stops, fmt.Sprintf("%s–%s", stopped.Format(time.StampMilli), exited.Format(time.StampMilli)))
		serving = next
	}
	time.Sleep(2 * time.Second)
	stopWriters()
	for range writers {
		<-done
	}

	accepted, conflicts := 0, 0
	var refused []string
	for _, w := range writers {
		n, c, r := w.Figures()
		accepted, conflicts = accepted+n, conflicts+c
		for _, x := range r {
			refused = append(refused, x.String())
		}
	}
	if accepted == 0 {
		t.Fatal("no write was accepted")
	}
	if len(refused) > 0 {
		t.Errorf("%d of %d writes were refused across %d hand-overs (stops: %s):\n%s",
			len(refused), accepted+conflicts+len(refused), handOvers, strings.Join(stops, ", "), strings.Join(refused, "\n"))
	}
	conns, connRefused := svc.counts()
	t.Logf("%d hand-overs of this tree to itself: %d writes accepted, %d conflicts, %d refused; webhook Service connections %v, refused %d",
		handOvers, accepted, conflicts, len(refused), conns, connRefused)
}
