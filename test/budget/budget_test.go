package budget

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]float64{"": 1, "1": 1, "2.5": 2.5, "0.5": 0.5} {
		if got, err := parse(in); err != nil || got != want {
			t.Errorf("parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "two", "NaN", "Inf", "1e9"} {
		if _, err := parse(in); err == nil || !strings.Contains(err.Error(), Var) {
			t.Errorf("parse(%q) = %v; want an error naming %s", in, err, Var)
		}
	}
}

func TestContextSaysWhatItWaitedFor(t *testing.T) {
	ctx, cancel := Context(t, t.Context(), time.Millisecond, "the answer")
	defer cancel()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("ctx.Err() = %v, want DeadlineExceeded", ctx.Err())
	}
	err := Err(ctx, ctx.Err())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waited "+Scale(time.Millisecond).String()+" for the answer") {
		t.Errorf("Err = %v; want it to say what it waited for and how long", err)
	}
	if err := Err(context.Background(), errors.New("other")); err.Error() != "other" {
		t.Errorf("Err of a live context changed the error: %v", err)
	}
}

func TestPollSaysHowLongItWaited(t *testing.T) {
	err := Poll(t.Context(), time.Millisecond, 5*time.Millisecond, true, func(context.Context) (bool, error) { return false, nil })
	if err == nil || !strings.Contains(err.Error(), "waited "+Scale(5*time.Millisecond).String()) {
		t.Errorf("Poll = %v; want it to say how long it waited", err)
	}
	if err := Poll(t.Context(), time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return true, nil }); err != nil {
		t.Errorf("Poll of a condition that holds = %v", err)
	}
}
