package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
	"github.com/handroll/handroll/test/budget"
	"github.com/handroll/handroll/test/controlplane"
	"github.com/handroll/handroll/test/operator"
)

// scaleEnv sets how many WebApps TestUninstallAtScale deletes: 10000 is
// the size the uninstall is measured at, too slow for every test run.
const scaleEnv = "HANDROLL_UNINSTALL_SCALE"

// podMemoryLimit is the uninstall hook Job's memory limit
// (charts/handroll/templates/uninstall.yaml).
const podMemoryLimit = 64 << 20

// TestUninstallAtScale: `handroll uninstall --delete-webapps` with the
// chart's default --timeout deletes every WebApp of a cluster that has
// many, in that timeout counted from its start, within the hook pod's
// memory limit. It reports the wall time and the process's peak RSS.
// 1,000 WebApps by default; HANDROLL_UNINSTALL_SCALE=10000 for the size
// the uninstall is measured at.
func TestUninstallAtScale(t *testing.T) {
	n := 1000
	if s := os.Getenv(scaleEnv); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of WebApps", scaleEnv, s)
		}
	}
	timeout := chartUninstallTimeout(t)
	// The garbage collector ends every foreground deletion.
	cp := controlplane.StartForTest(t, controlplane.Options{Controllers: true, CRDDirs: []string{filepath.Join(repoRoot(t), "manifests", "crd")}})
	bin := operator.Handroll(t)
	waitForGarbageCollector(t.Context(), t, cp.HandrollClient(t), cp.KubeClient(t))

	began := time.Now()
	createWebApps(t, cp, n)
	t.Logf("created %d WebApps in %s", n, time.Since(began).Round(time.Millisecond))

	// The uninstall's own timeout is what is tested; this one only keeps a
	// hung process from holding the test.
	ctx, cancel := budget.Context(t, t.Context(), timeout+2*time.Minute, "handroll uninstall of "+strconv.Itoa(n)+" WebApps to exit")
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "uninstall", "--kubeconfig="+cp.Kubeconfig, "--operator-namespace=handroll-system",
		"--deployment=", "--delete-webapps", "--timeout="+timeout.String())
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	began = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	peaks := watchPeakRSS(cmd.Process.Pid)
	err := cmd.Wait()
	took, peak, out := time.Since(began), <-peaks, output.Bytes()
	t.Logf("handroll uninstall --delete-webapps --timeout=%s of %d WebApps: %s, peak RSS %.1f MiB\n%s", timeout, n, took.Round(time.Millisecond), float64(peak)/(1<<20), out)
	// Success is within its --timeout, counted from its start: its wall
	// time is logged above, not held to a deadline a busy machine could
	// miss on the process's own start.
	if err != nil {
		t.Fatalf("handroll uninstall --delete-webapps of %d WebApps: %v\n%s", n, err, out)
	}
	if peak > podMemoryLimit {
		t.Errorf("peak RSS %.1f MiB, over the hook pod's limit of %d MiB", float64(peak)/(1<<20), podMemoryLimit>>20)
	}
	list, err := cp.HandrollClient(t).HandrollV1().WebApps(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) > 0 {
		t.Errorf("handroll uninstall succeeded with WebApps left, %s/%s among them", list.Items[0].Namespace, list.Items[0].Name)
	}
}

// watchPeakRSS reads the peak resident set of process pid (VmHWM) every
// 20 ms until it exits, then sends the last reading. The child's own
// rusage would not do: until it execs, a child shares its parent's memory,
// and ru_maxrss then counts the test's (with -race, over 100 MiB).
func watchPeakRSS(pid int) <-chan int64 {
	peak := make(chan int64, 1)
	go func() {
		var last int64
		for {
			data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				peak <- last // gone
				return
			}
			for line := range strings.Lines(string(data)) {
				if kib, ok := strings.CutPrefix(line, "VmHWM:"); ok {
					if n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kib), "kB")), 10, 64); err == nil {
						last = n << 10
					}
				}
			}
			if strings.Contains(string(data), "State:\tZ") {
				peak <- last // exited, not yet reaped
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return peak
}

// chartUninstallTimeout is the chart's default uninstall.timeout.
func chartUninstallTimeout(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "charts", "handroll", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Uninstall struct {
			Timeout string `json:"timeout"`
		} `json:"uninstall"`
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	d, err := time.ParseDuration(values.Uninstall.Timeout)
	if err != nil {
		t.Fatalf("the chart's uninstall.timeout: %v", err)
	}
	return d
}

// createWebApps creates n WebApps over a few namespaces, concurrently, with
// a client of its own that client-side throttling does not slow.
func createWebApps(t *testing.T, cp *controlplane.ControlPlane, n int) {
	t.Helper()
	const namespaces, workers = 20, 32
	cfg := *cp.Config
	cfg.QPS, cfg.Burst = -1, 0 // no client-side limit: the API server's own applies
	hc, err := versioned.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube := cp.KubeClient(t)
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-%02d", i)}}
		if _, err := kube.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := budget.Context(t, t.Context(), 10*time.Minute, "the WebApps to be created")
	defer cancel()
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				w := &handrollv1.WebApp{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i)},
					Spec:       handrollv1.WebAppSpec{Image: "registry.invalid/app:1"},
				}
				if _, err := hc.HandrollV1().WebApps(fmt.Sprintf("scale-%02d", i%namespaces)).Create(ctx, w, metav1.CreateOptions{}); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatalf("creating %d WebApps: %v", n, err)
	default:
	}
}
