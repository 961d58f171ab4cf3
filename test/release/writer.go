package release

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	handrollv1 "github.com/handroll/handroll/pkg/apis/handroll/v1"
	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

// Writer changes the spec of its WebApps, one write after another, as v1
// and as v1alpha1 in turn: every write goes through the mutating and the
// validating webhook, and every v1alpha1 one through the conversion webhook
// too. A conflict (the operator wrote the status in between) is counted
// apart, and the next write reads again, as any read-modify-write client
// does; any other error is a refused write.
type Writer struct {
	Client versioned.Interface
	NS     string
	Names  []string

	mu        sync.Mutex
	writes    int // accepted
	conflicts int
	refused   []Refusal
}

// Run writes until ctx is done, every interval.
func (w *Writer) Run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := w.Names[i%len(w.Names)]
		value := strconv.Itoa(i)
		var err error
		if i%2 == 0 {
			err = w.writeV1(ctx, name, value)
		} else {
			err = w.writeV1alpha1(ctx, name, value)
		}
		w.mu.Lock()
		switch {
		case err == nil:
			w.writes++
		case apierrors.IsConflict(err):
			w.conflicts++
		case ctx.Err() == nil:
			w.refused = append(w.refused, Refusal{At: time.Now(), Name: name, Err: err})
		}
		w.mu.Unlock()
	}
}

func writeEnv(value string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "WRITE", Value: value}} }

func (w *Writer) writeV1(ctx context.Context, name, value string) error {
	c := w.Client.HandrollV1().WebApps(w.NS)
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec.Env = writeEnv(value)
	_, err = c.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func (w *Writer) writeV1alpha1(ctx context.Context, name, value string) error {
	c := w.Client.HandrollV1alpha1().WebApps(w.NS)
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec.Env = writeEnv(value)
	_, err = c.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// Figures returns the accepted writes, the conflicts and the refusals.
func (w *Writer) Figures() (writes, conflicts int, refused []Refusal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.conflicts, append([]Refusal(nil), w.refused...)
}

// A Refusal is a write the API server did not accept.
type Refusal struct {
	At   time.Time
	Name string
	Err  error
}

func (r Refusal) String() string {
	return fmt.Sprintf("%s %s: %v", r.At.Format(time.StampMilli), r.Name, r.Err)
}

// ClosedConnection tells whether err is a webhook call that failed because
// the webhook server closed the connection the API server sent it on.
func (r Refusal) ClosedConnection() bool {
	msg := r.Err.Error()
	return strings.Contains(msg, "webhook") &&
		(strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, "use of closed network connection") ||
			strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "broken pipe"))
}

// CreateWritten creates n WebApps of image in ns for a Writer to change:
// no pods, so that its writes cost the cluster little.
func CreateWritten(ctx context.Context, t testing.TB, hc versioned.Interface, ns, image string, n int) (names []string) {
	t.Helper()
	for i := range n {
		name := "written-" + string(rune('a'+i))
		if _, err := hc.HandrollV1().WebApps(ns).Create(ctx, &handrollv1.WebApp{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       handrollv1.WebAppSpec{Image: image, Replicas: ptr.To[int32](0), Env: writeEnv("0")},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating WebApp %s: %v", name, err)
		}
		names = append(names, name)
	}
	return names
}
