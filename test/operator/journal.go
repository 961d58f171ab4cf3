package operator

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/handroll/handroll/pkg/controller"
)

// ReadJournal reads a replica's journal: FILE.1 (what a rotation left, if
// any) and then FILE, which is the order they were written in.
func ReadJournal(path string) ([]controller.JournalEntry, error) {
	rotated, err := readJournalFile(path + ".1")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries, err := readJournalFile(path)
	return append(rotated, entries...), err
}

func readJournalFile(path string) ([]controller.JournalEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var entries []controller.JournalEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e controller.JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// A process killed mid-write leaves at most a torn last line.
			break
		}
		entries = append(entries, e)
	}
	return entries, sc.Err()
}

// ReconcileInterval is one reconcile as a journal recorded it.
type ReconcileInterval struct {
	Replica    string
	Key        string
	Start, End time.Time
	CutShort   bool // no end line: the process died during it
}

// ReconcileIntervals pairs starts with ends. A reconcile with no end was cut
// short when the process exited; it counts as running until exited, the
// moment the test saw the process gone.
func ReconcileIntervals(entries []controller.JournalEntry, exited time.Time) []ReconcileInterval {
	open := map[uint64]ReconcileInterval{}
	var out []ReconcileInterval
	for _, e := range entries {
		switch e.Event {
		case "start":
			open[e.ID] = ReconcileInterval{Replica: e.Replica, Key: e.Key, Start: e.Time}
		case "end":
			iv := open[e.ID]
			delete(open, e.ID)
			iv.End = e.Time
			out = append(out, iv)
		}
	}
	for _, iv := range open {
		iv.End, iv.CutShort = exited, true
		out = append(out, iv)
	}
	return out
}

// Overlapping returns, for each reconcile that started while another
// replica's reconcile was still running, a description of the pair.
func Overlapping(intervals []ReconcileInterval) []string {
	sort.Slice(intervals, func(i, j int) bool { return intervals[i].Start.Before(intervals[j].Start) })
	latest := map[string]ReconcileInterval{} // per replica, the reconcile that ends last so far
	var out []string
	for _, iv := range intervals {
		for replica, other := range latest {
			if replica != iv.Replica && iv.Start.Before(other.End) {
				out = append(out, fmt.Sprintf("%s started %s on %s at %s, while %s's reconcile of %s (from %s, cut short %v) ran until %s",
					iv.Replica, iv.Key, iv.Replica, iv.Start.Format(time.StampMicro), replica, other.Key,
					other.Start.Format(time.StampMicro), other.CutShort, other.End.Format(time.StampMicro)))
			}
		}
		if cur, ok := latest[iv.Replica]; !ok || iv.End.After(cur.End) {
			latest[iv.Replica] = iv
		}
	}
	return out
}
