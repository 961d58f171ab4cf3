package real

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handroll/handroll/pkg/controller"
	"github.com/handroll/handroll/test/operator"
)

// journalCollector copies every operator replica's reconcile journal (the
// emptyDir under the kubelet's pod directory) and container log (the
// kubelet's pod log directory) from the node every 100 ms, since both go
// with the pod.
type journalCollector struct {
	mu    sync.Mutex
	files map[string][]byte // journals, by path on the node: the longest content seen
	logs  map[string][]byte // container logs, likewise
	quit  chan struct{}
	done  chan struct{}
}

func newJournalCollector() *journalCollector {
	return &journalCollector{files: map[string][]byte{}, logs: map[string][]byte{}, quit: make(chan struct{}), done: make(chan struct{})}
}

func (c *journalCollector) start() {
	go func() {
		defer close(c.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			c.collect()
			select {
			case <-c.quit:
				c.collect()
				return
			case <-tick.C:
			}
		}
	}()
}

func (c *journalCollector) stop() {
	select {
	case <-c.quit:
	default:
		close(c.quit)
	}
	<-c.done
}

func (c *journalCollector) collect() {
	c.copy(c.files, filepath.Join(cluster.Node.Dir, "kubelet", "pods", "*", "volumes", "kubernetes.io~empty-dir", "journal", filepath.Base(journalPath)))
	c.copy(c.logs, filepath.Join(cluster.Node.Dir, "pod-logs", operatorNamespace+"_*", "manager", "*.log"))
}

func (c *journalCollector) copy(into map[string][]byte, pattern string) {
	paths, _ := filepath.Glob(pattern)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		c.mu.Lock()
		if len(data) > len(into[p]) {
			into[p] = data
		}
		c.mu.Unlock()
	}
}

// logged returns when pod's manager container first wrote a line holding
// text, from the runtime's own timestamp on the line.
func (c *journalCollector) logged(pod, text string) (time.Time, bool) {
	c.collect()
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, data := range c.logs {
		if !strings.Contains(path, "/"+operatorNamespace+"_"+pod+"_") {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, text) {
				continue
			}
			// CRI log format: <RFC 3339 time> <stream> <tag> <line>.
			at, err := time.Parse(time.RFC3339Nano, strings.SplitN(line, " ", 2)[0])
			if err == nil {
				return at, true
			}
		}
	}
	return time.Time{}, false
}

// entries parses what was collected, one replica process per file.
func (c *journalCollector) entries(t *testing.T) [][]controller.JournalEntry {
	t.Helper()
	c.collect()
	c.mu.Lock()
	defer c.mu.Unlock()
	dir := t.TempDir()
	var out [][]controller.JournalEntry
	i := 0
	for _, data := range c.files {
		path := filepath.Join(dir, "journal-"+string(rune('a'+i)))
		i++
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := operator.ReadJournal(path)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// intervals pairs each replica's starts and ends. A reconcile whose end
// was not copied (its pod went first, or it was SIGKILLed) counts as
// running until the replica's last line.
func (c *journalCollector) intervals(t *testing.T) []operator.ReconcileInterval {
	// A container the kubelet restarted appends to its pod's file as a new
	// replica process, whose reconcile ids start again.
	byReplica := map[string][]controller.JournalEntry{}
	for _, entries := range c.entries(t) {
		for _, e := range entries {
			byReplica[e.Replica] = append(byReplica[e.Replica], e)
		}
	}
	var all []operator.ReconcileInterval
	for _, entries := range byReplica {
		last := entries[len(entries)-1].Time
		all = append(all, operator.ReconcileIntervals(entries, last)...)
	}
	return all
}

// firstStartAfter is the first reconcile start by replica after at.
func (c *journalCollector) firstStartAfter(t *testing.T, replica string, at time.Time) (time.Time, bool) {
	var first time.Time
	for _, entries := range c.entries(t) {
		for _, e := range entries {
			if e.Replica == replica && e.Event == "start" && e.Time.After(at) && (first.IsZero() || e.Time.Before(first)) {
				first = e.Time
			}
		}
	}
	return first, !first.IsZero()
}
