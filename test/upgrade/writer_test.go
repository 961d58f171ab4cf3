package upgrade

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/handroll/handroll/pkg/generated/clientset/versioned"
)

// writer changes the spec of its WebApps, one write after another, as v1
// and as v1alpha1 in turn: every write goes through the mutating and the
// validating webhook, and every v1alpha1 one through the conversion webhook
// too. A conflict (the operator wrote the status in between) is counted
// apart, and the next write reads again, as any read-modify-write client
// does; any other error is a refused write.
type writer struct {
	hc    versioned.Interface
	ns    string
	names []string

	mu        sync.Mutex
	writes    int // accepted
	conflicts int
	refused   []refusal
}

// run writes until ctx is done, every interval.
func (w *writer) run(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		name := w.names[i%len(w.names)]
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
			w.refused = append(w.refused, refusal{at: time.Now(), name: name, err: err})
		}
		w.mu.Unlock()
	}
}

func writeEnv(value string) []corev1.EnvVar { return []corev1.EnvVar{{Name: "WRITE", Value: value}} }

func (w *writer) writeV1(ctx context.Context, name, value string) error {
	c := w.hc.HandrollV1().WebApps(w.ns)
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec.Env = writeEnv(value)
	_, err = c.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

func (w *writer) writeV1alpha1(ctx context.Context, name, value string) error {
	c := w.hc.HandrollV1alpha1().WebApps(w.ns)
	got, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got.Spec.Env = writeEnv(value)
	_, err = c.Update(ctx, got, metav1.UpdateOptions{})
	return err
}

// figures returns the accepted writes, the conflicts and the refusals.
func (w *writer) figures() (writes, conflicts int, refused []refusal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.conflicts, append([]refusal(nil), w.refused...)
}

// A refusal is a write the API server did not accept.
type refusal struct {
	at   time.Time
	name string
	err  error
}

func (r refusal) String() string {
	return fmt.Sprintf("%s %s: %v", r.at.Format(time.StampMilli), r.name, r.err)
}

// closedConnection tells whether err is a webhook call that failed because
// the webhook server closed the connection the API server sent it on.
func (r refusal) closedConnection() bool {
	msg := r.err.Error()
	return strings.Contains(msg, "webhook") &&
		(strings.HasSuffix(msg, ": EOF") || strings.Contains(msg, "use of closed network connection") ||
			strings.Contains(msg, "connection reset by peer") || strings.Contains(msg, "broken pipe"))
}
