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
//
// With a size cap the file is rotated, as log files are: a line that would
// take it past the cap is written to a fresh file instead, after the old one
// is renamed to FILE.1 (replacing the previous FILE.1) and the fresh one
// begins with an "open" line. Every line is whole in one of the two files;
// reading FILE.1 then FILE gives the lines in order. A journal thus takes at
// most about twice the cap on disk.
type FileJournal struct {
	path    string
	replica string
	maxSize int64 // 0: no cap
	next    atomic.Uint64

	mu   sync.Mutex
	f    *os.File
	size int64 // bytes in f
	err  error // the first failed write; later writes are not tried
}

// OpenJournal opens (appending, creating if needed) the journal at path for
// the process identified by replica, and writes its "open" line. maxSize
// caps the file in bytes, as FileJournal describes; 0 or less: no cap.
func OpenJournal(path, replica string, maxSize int64) (*FileJournal, error) {
	j := &FileJournal{path: path, replica: replica, maxSize: max(maxSize, 0)}
	j.mu.Lock()
	err := j.open()
	j.mu.Unlock()
	if err != nil {
		return nil, err
	}
	j.write(j.openEntry())
	if err := j.Err(); err != nil {
		_ = j.Close()
		return nil, err
	}
	return j, nil
}

// open opens j.path for appending and learns its size. j.mu is held.
func (j *FileJournal) open() error {
	f, err := os.OpenFile(j.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("reconcile journal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("reconcile journal: %w", err)
	}
	j.f, j.size = f, fi.Size()
	return nil
}

func (j *FileJournal) openEntry() JournalEntry {
	return JournalEntry{Event: "open", Replica: j.replica, Time: time.Now()}
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
	line := encodeLine(e)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	if j.maxSize > 0 && j.size > 0 && j.size+int64(len(line)) > j.maxSize {
		if err := j.rotate(); err != nil {
			j.err = err
			return
		}
	}
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		j.err = fmt.Errorf("reconcile journal: %w", err)
	}
}

// rotate renames the full file to FILE.1 and opens a fresh FILE, which
// starts with an "open" line so that a reader of it alone knows the
// replica. j.mu is held.
func (j *FileJournal) rotate() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("reconcile journal: closing for rotation: %w", err)
	}
	if err := os.Rename(j.path, j.path+".1"); err != nil {
		return fmt.Errorf("reconcile journal: rotating: %w", err)
	}
	if err := j.open(); err != nil {
		return err
	}
	n, err := j.f.Write(encodeLine(j.openEntry()))
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("reconcile journal: %w", err)
	}
	return nil
}

func encodeLine(e JournalEntry) []byte {
	line, err := json.Marshal(e)
	if err != nil {
		panic(err) // the entry has only strings, numbers and a time
	}
	return append(line, '\n')
}
