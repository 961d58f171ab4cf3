// Package budget sizes the time tests wait. Every deadline a test sets is
// a budget for its own work (never for a build or the control plane's
// first start) and goes through Scale, so that one environment variable,
// HANDROLL_TEST_TIMEOUT_SCALE, makes them all longer on a slow or busy
// machine. When a budget runs out, the test says what it waited for and
// for how long, rather than a bare "context deadline exceeded".
package budget

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Var is the environment variable that multiplies every budget: a
// positive number, 1 when unset.
const Var = "HANDROLL_TEST_TIMEOUT_SCALE"

// The variable is checked once, when the test binary starts: a value that
// is not a positive number stops the binary before any test, naming Var,
// rather than running with budgets nobody asked for.
func init() {
	if _, err := parse(os.Getenv(Var)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
}

// factor reads the variable again on first use, from a test: go test
// caches a result with the environment its tests read, and what init
// reads it does not see.
var factor = sync.OnceValue(func() float64 {
	f, _ := parse(os.Getenv(Var))
	return f
})

func parse(s string) (float64, error) {
	if s == "" {
		return 1, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0) || f > 1000 {
		return 0, fmt.Errorf("%s=%q: want a positive number (at most 1000) such as 1, the default, or 2.5: it multiplies every test's time budget", Var, s)
	}
	return f, nil
}

// Factor is the multiplier in use.
func Factor() float64 { return factor() }

// Scale returns d multiplied by HANDROLL_TEST_TIMEOUT_SCALE.
func Scale(d time.Duration) time.Duration { return time.Duration(float64(d) * factor()) }

// Expired is the cause of a context from Context that ran out.
type Expired struct {
	What  string        // what was waited for
	After time.Duration // the budget, scaled
}

func (e *Expired) Error() string {
	return fmt.Sprintf("waited %s for %s %s", e.After, e.What, note())
}

// note says where a budget's length comes from.
func note() string {
	if f := factor(); f != 1 {
		return fmt.Sprintf("(%s=%g)", Var, f)
	}
	return fmt.Sprintf("(%s multiplies it)", Var)
}

// Context is context.WithTimeout(parent, Scale(d)) whose cause, when it
// runs out, is an *Expired saying what was waited for (what) and for how
// long. With t (nil in TestMain), t's log says so too as the budget runs
// out: the errors that client-go and wait return from such a context carry
// only "context deadline exceeded".
func Context(t testing.TB, parent context.Context, d time.Duration, what string) (context.Context, context.CancelFunc) {
	expired := &Expired{What: what, After: Scale(d)}
	ctx, cancel := context.WithTimeoutCause(parent, expired.After, expired)
	if t == nil {
		return ctx, cancel
	}
	// No log once t has ended: testing panics on it.
	var mu sync.Mutex
	ended := false
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		ended = true
	})
	context.AfterFunc(ctx, func() {
		if !errors.Is(context.Cause(ctx), expired) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			t.Log(expired.Error())
		}
	})
	return ctx, cancel
}

// Err returns err, with the cause of ctx added when ctx's budget ran out,
// for an error that would say only "context deadline exceeded".
func Err(ctx context.Context, err error) error {
	var e *Expired
	if err == nil || !errors.As(context.Cause(ctx), &e) {
		return err
	}
	return fmt.Errorf("%w: %w", err, e)
}

// Poll is wait.PollUntilContextTimeout with the timeout d scaled; when d
// or ctx's budget runs out, the error says how long it waited.
func Poll(ctx context.Context, interval, d time.Duration, immediate bool, cond wait.ConditionWithContextFunc) error {
	d = Scale(d)
	err := wait.PollUntilContextTimeout(ctx, interval, d, immediate, cond)
	if err != nil && ctx.Err() == nil && wait.Interrupted(err) {
		return fmt.Errorf("%w: waited %s %s", err, d, note())
	}
	return Err(ctx, err)
}
