package webapp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"
)

// TestDirectoryWriterGroupsConcurrentEntries: entries set while a write is
// in flight go out together in the next one; every entry is written exactly
// once, in a batch that its caller waited for.
func TestDirectoryWriterGroupsConcurrentEntries(t *testing.T) {
	var (
		d       directoryWriter
		mu      sync.Mutex
		batches []map[string]string
	)
	release := make(chan struct{})
	write := func(_ context.Context, entries map[string]string) error {
		mu.Lock()
		first := len(batches) == 0
		batches = append(batches, maps.Clone(entries))
		mu.Unlock()
		if first {
			<-release // hold the first write until every other caller queued
		}
		return nil
	}

	const callers = 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	wg.Go(func() { errs <- d.set(context.Background(), "k0", "v0", write) })
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(batches) == 1 })
	for i := 1; i < callers; i++ {
		wg.Go(func() { errs <- d.set(context.Background(), fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i), write) })
	}
	waitFor(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.next != nil && len(d.next.entries) == callers-1
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("set: %v", err)
		}
	}
	if len(batches) != 2 {
		t.Fatalf("%d writes for %d entries, want 2 (one in flight, then the rest together): %v", len(batches), callers, batches)
	}
	seen := map[string]string{}
	for _, b := range batches {
		for k, v := range b {
			if _, dup := seen[k]; dup {
				t.Errorf("%s written twice", k)
			}
			seen[k] = v
		}
	}
	for i := range callers {
		if k := fmt.Sprintf("k%d", i); seen[k] != fmt.Sprintf("v%d", i) {
			t.Errorf("%s = %q", k, seen[k])
		}
	}
}

// TestDirectoryWriterReportsTheBatchError: every caller of a failed batch
// gets its error; a later batch starts afresh.
func TestDirectoryWriterReportsTheBatchError(t *testing.T) {
	var d directoryWriter
	boom := errors.New("boom")
	release := make(chan struct{})
	calls := 0
	var mu sync.Mutex
	write := func(_ context.Context, entries map[string]string) error {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			<-release
			return nil
		}
		return boom
	}
	first := make(chan error, 1)
	go func() { first <- d.set(context.Background(), "a", "1", write) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return calls == 1 })
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, k := range []string{"b", "c"} {
		wg.Go(func() { errs <- d.set(context.Background(), k, "", write) })
	}
	waitFor(t, func() bool { d.mu.Lock(); defer d.mu.Unlock(); return d.next != nil && len(d.next.entries) == 2 })
	close(release)
	wg.Wait()
	close(errs)
	if err := <-first; err != nil {
		t.Errorf("the first batch: %v", err)
	}
	for err := range errs {
		if !errors.Is(err, boom) {
			t.Errorf("a caller of the failed batch got %v, want its error", err)
		}
	}
	if err := d.set(context.Background(), "d", "4", func(context.Context, map[string]string) error { return nil }); err != nil {
		t.Errorf("after a failed batch: %v", err)
	}
}

// TestDirectoryWriterCallerGivesUp: a caller whose context ends while
// another write is in flight returns at once; its entry is still written.
func TestDirectoryWriterCallerGivesUp(t *testing.T) {
	var d directoryWriter
	release := make(chan struct{})
	var mu sync.Mutex
	var written []map[string]string
	write := func(_ context.Context, entries map[string]string) error {
		mu.Lock()
		written = append(written, maps.Clone(entries))
		n := len(written)
		mu.Unlock()
		if n == 1 {
			<-release
		}
		return nil
	}
	done := make(chan error, 1)
	go func() { done <- d.set(context.Background(), "a", "1", write) }()
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(written) == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.set(ctx, "b", "2", write); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller got %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := d.set(context.Background(), "c", "3", write); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 2 || written[1]["b"] != "2" || written[1]["c"] != "3" {
		t.Errorf("writes %v: want the cancelled caller's entry written with the next", written)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition never held")
		}
		time.Sleep(time.Millisecond)
	}
}
