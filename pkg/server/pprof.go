package server

import (
	"net/http"
	"net/http/pprof"
)

// PprofHandler serves Go's profiles under /debug/pprof/ (PprofBindAddress in
// controller-runtime). It is off unless asked for: profiles expose the
// process's internals and cost CPU while taken.
func PprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
