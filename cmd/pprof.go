//go:build pprof

// Profiling for benchmarks only (docs/performance.md#profiling-the-watch):
// a binary built with -tags pprof writes a CPU profile of its first
// OPCTL_PROFILE_SECONDS (default 30) to $OPCTL_CPUPROFILE.PID, and a heap
// profile beside it (.heap), when that variable is set. The opctl that
// users run is built without the tag and carries none of it.
package cmd

import (
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"time"
)

func init() {
	path := os.Getenv("OPCTL_CPUPROFILE")
	if path == "" {
		return
	}
	secs, err := strconv.Atoi(os.Getenv("OPCTL_PROFILE_SECONDS"))
	if err != nil || secs <= 0 {
		secs = 30
	}
	path += "." + strconv.Itoa(os.Getpid())
	f, err := os.Create(path)
	if err != nil {
		os.Stderr.WriteString("pprof: " + err.Error() + "\n")
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		os.Stderr.WriteString("pprof: " + err.Error() + "\n")
		return
	}
	go func() {
		time.Sleep(time.Duration(secs) * time.Second)
		pprof.StopCPUProfile()
		f.Close()
		runtime.GC()
		if h, err := os.Create(path + ".heap"); err == nil {
			pprof.Lookup("allocs").WriteTo(h, 0)
			h.Close()
		}
		os.Stderr.WriteString("pprof: wrote " + path + "\n")
	}()
}
