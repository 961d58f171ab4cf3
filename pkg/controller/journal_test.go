package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// readLines parses every line of a journal file; a line that is not whole
// JSON fails the test.
func readLines(t *testing.T, path string) []JournalEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []JournalEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e JournalEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: line %q is not a whole entry: %v", filepath.Base(path), sc.Text(), err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFileJournalRotates: concurrent reconciles write past the cap once;
// the journal rotates to FILE.1 and no line is lost, split or duplicated
// across the two files, each of which begins with an "open" line.
func TestFileJournalRotates(t *testing.T) {
	const writers, perWriter = 8, 75
	path := filepath.Join(t.TempDir(), "journal")
	// About one and a half caps of lines in all: exactly one rotation.
	sample := len(encodeLine(JournalEntry{Event: "start", Replica: "replica-1", Time: time.Now(), ID: 100, Controller: "webapp", Key: "ns/w-1-10"}))
	lines := 1 + 2*writers*perWriter
	maxSize := int64(sample * lines * 2 / 3)

	j, err := OpenJournal(path, "replica-1", maxSize)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				end := j.Begin("webapp", Request{Namespace: "ns", Name: fmt.Sprintf("w-%d-%d", w, i)})
				if i%2 == 0 {
					end(nil)
				} else {
					end(errors.New("boom"))
				}
			}
		})
	}
	wg.Wait()
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	old, cur := readLines(t, path+".1"), readLines(t, path)
	for name, part := range map[string][]JournalEntry{"FILE.1": old, "FILE": cur} {
		if len(part) == 0 || part[0].Event != "open" || part[0].Replica != "replica-1" {
			t.Errorf("%s does not begin with this replica's open line: %+v", name, part[:min(len(part), 1)])
		}
	}
	for name, p := range map[string]string{"FILE.1": path + ".1", "FILE": path} {
		if fi, err := os.Stat(p); err != nil || fi.Size() > maxSize {
			t.Errorf("%s: size %d, cap %d (%v)", name, fi.Size(), maxSize, err)
		}
	}
	seen := map[string]int{}
	for _, e := range append(old, cur...) {
		if e.Event == "open" {
			continue
		}
		seen[fmt.Sprintf("%s %d %s", e.Event, e.ID, e.Key)]++
	}
	if got, want := len(seen), 2*writers*perWriter; got != want {
		t.Errorf("%d distinct start and end lines, want %d", got, want)
	}
	for line, n := range seen {
		if n != 1 {
			t.Errorf("%q written %d times", line, n)
		}
	}
	// Each reconcile's end follows its start: in the same file, or its
	// start in FILE.1 and its end in FILE.
	pos := map[string]int{}
	for i, e := range append(old, cur...) {
		pos[fmt.Sprintf("%s %d", e.Event, e.ID)] = i
	}
	for id := 1; id <= writers*perWriter; id++ {
		if pos[fmt.Sprintf("start %d", id)] > pos[fmt.Sprintf("end %d", id)] {
			t.Errorf("reconcile %d: end before start", id)
		}
	}

	// Opened again, the journal appends to FILE and counts its size.
	j, err = OpenJournal(path, "replica-2", maxSize)
	if err != nil {
		t.Fatal(err)
	}
	if j.size != fileSize(t, path) {
		t.Errorf("reopened journal counts %d bytes, the file has %d", j.size, fileSize(t, path))
	}
	_ = j.Close()
	if got := readLines(t, path); len(got) != len(cur)+1 || got[len(got)-1].Replica != "replica-2" {
		t.Errorf("reopening did not append one open line: %d lines, was %d", len(got), len(cur))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
