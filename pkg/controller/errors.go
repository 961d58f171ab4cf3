package controller

import "errors"

// TerminalError marks err as one that retrying cannot fix (for example an
// invalid spec that only a user can correct). The controller logs and counts
// it but does not requeue the key; a new event for the object will. err
// stays reachable with errors.Is and errors.As.
func TerminalError(err error) error {
	return &terminalError{err: err}
}

// IsTerminal reports whether err, or any error it wraps, came from
// TerminalError.
func IsTerminal(err error) bool {
	var te *terminalError
	return errors.As(err, &te)
}

type terminalError struct{ err error }

func (e *terminalError) Error() string {
	if e.err == nil {
		return "terminal error"
	}
	return "terminal error: " + e.err.Error()
}

func (e *terminalError) Unwrap() error { return e.err }
