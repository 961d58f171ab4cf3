package controller

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Journal records when each reconcile starts and ends. Tests of leader
// election read it to prove that two replicas never reconcile at the same
// time; operators can read it to audit who changed what, when.
type Journal interface {
	// Begin records the start of a reconcile of req by controller, and
	// returns the function that records its end with its error.
	Begin(controller string, req Request) (end func(error))
}

// JournalEntry is one line of a FileJournal.
type JournalEntry struct {
	// Event is "open" (the first line a process writes), "start" or "end".
	Event string `json:"event"`
	// Replica identifies the process: its leader election identity.
	Replica string    `json:"replica"`
	Time    time.Time `json:"time"`
	// ID pairs a reconcile's start with its end, within one Replica.
	ID         uint64 `json:"id,omitempty"`
	Controller string `json:"controller,omitempty"`
	Key        string `json:"key,omitempty"`
	Error      string `json:"error,omitempty"`
}

// FileJournal appends JournalEntry lines, as JSON, to a file. Each line
// reaches the file in one unbuffered write before the reconcile proceeds
// (start) or is reported done (end), so a process killed at any point
// leaves every line it wrote: a reconcile with a start and no end was cut
// short by the process's death.
type FileJournal struct {
	replica string
	next    atomic.Uint64

	mu  sync.Mutex
	f   *os.File
	err error // the first failed write; later writes are not tried
}

// OpenJournal opens (appending, creating if needed) the journal at path for
// the process identified by replica, and writes its "open" line.
func OpenJournal(path, replica string) (*FileJournal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("reconcile journal: %w", err)
	}
	j := &FileJournal{replica: replica, f: f}
	j.write(JournalEntry{Event: "open", Replica: replica, Time: time.Now()})
	if err := j.Err(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return j, nil
}

// Begin implements Journal.
func (j *FileJournal) Begin(controller string, req Request) func(error) {
	id := j.next.Add(1)
	key := req.String()
	j.write(JournalEntry{Event: "start", Replica: j.replica, Time: time.Now(), ID: id, Controller: controller, Key: key})
	return func(err error) {
		e := JournalEntry{Event: "end", Replica: j.replica, Time: time.Now(), ID: id, Controller: controller, Key: key}
		if err != nil {
			e.Error = err.Error()
		}
		j.write(e)
	}
}

// Err returns the first write error, if any. A journal that cannot be
// written does not stop the reconciles; the caller decides what it means.
func (j *FileJournal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Close closes the file.
func (j *FileJournal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.f.Close()
}

func (j *FileJournal) write(e JournalEntry) {
	line, err := json.Marshal(e)
	if err != nil {
		panic(err) // the entry has only strings, numbers and a time
	}
	line = append(line, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	if _, err := j.f.Write(line); err != nil {
		j.err = fmt.Errorf("reconcile journal: %w", err)
	}
}
