package webapp

import (
	"context"
	"sync"
)

// directoryWriter turns the workers' writes of directory entries into as
// few requests as it can, by group commit: entries that arrive while a write
// is in flight gather in the next batch, which one of their callers writes
// as soon as the write before it returns. Under load a batch holds up to one
// entry per worker; alone, an entry is written at once, with no added
// delay. Every caller waits for the write that holds its entry and gets its
// error, so a reconcile (or a finalizer's removal) still fails when its
// entry was not written.
//
// A caller whose ctx ends while it waits returns ctx's error, but its entry
// stays in the batch: it is written later, or replaced by a newer value for
// the same key, since the next batch keeps only the last value of each key.
//
// The zero value is ready to use.
type directoryWriter struct {
	mu      sync.Mutex
	next    *directoryBatch // open: accepting entries
	writing chan struct{}   // non-nil while a write is in flight; closed when it ends
}

type directoryBatch struct {
	entries map[string]string // "" removes the key
	done    chan struct{}
	err     error
}

// set puts key=value into the open batch and returns once write has
// written that batch.
func (d *directoryWriter) set(ctx context.Context, key, value string, write func(context.Context, map[string]string) error) error {
	d.mu.Lock()
	if d.next == nil {
		d.next = &directoryBatch{entries: map[string]string{}, done: make(chan struct{})}
	}
	b := d.next
	b.entries[key] = value
	for d.writing != nil {
		inFlight := d.writing
		d.mu.Unlock()
		select {
		case <-inFlight:
		case <-ctx.Done():
			return ctx.Err()
		}
		d.mu.Lock()
		if d.next != b {
			// Another caller of this batch took it and writes it.
			d.mu.Unlock()
			select {
			case <-b.done:
				return b.err
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	d.next = nil
	d.writing = make(chan struct{})
	d.mu.Unlock()

	b.err = write(ctx, b.entries)
	close(b.done)

	d.mu.Lock()
	close(d.writing)
	d.writing = nil
	d.mu.Unlock()
	return b.err
}
