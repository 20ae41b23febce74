package metrics

import (
	"fmt"
	"math"
	"net/http"
	"net/http/pprof"
	"strconv"
)

// maxProfileSeconds is the longest CPU profile, execution trace or delta
// profile (`seconds=N` on any /debug/pprof/ path) the metrics server
// takes. A longer one is refused with 400: the address is shared with the
// trainer's containers, and an unbounded profile would keep the profiler
// (one at a time per process) and a connection busy for as long as asked.
const maxProfileSeconds = 60

// handlePprof adds the net/http/pprof handlers under /debug/pprof/ to mux,
// each behind cappedSeconds.
func handlePprof(mux *http.ServeMux) {
	for path, h := range map[string]http.HandlerFunc{
		"/debug/pprof/":        pprof.Index,
		"/debug/pprof/cmdline": pprof.Cmdline,
		"/debug/pprof/profile": pprof.Profile,
		"/debug/pprof/symbol":  pprof.Symbol,
		"/debug/pprof/trace":   pprof.Trace,
	} {
		mux.Handle(path, cappedSeconds(h))
	}
}

// cappedSeconds refuses, with 400 and one line, a request whose seconds
// parameter is not a number or is above maxProfileSeconds, and passes any
// other request to h. It reads the parameter as the pprof handlers do
// (FormValue); how they treat a value at or below 0 is left to them.
func cappedSeconds(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := r.FormValue("seconds"); s != "" {
			sec, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(sec) || sec > maxProfileSeconds {
				http.Error(w, fmt.Sprintf("seconds=%.20q: a profile or trace lasts at most %d seconds here", s, maxProfileSeconds),
					http.StatusBadRequest)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}
