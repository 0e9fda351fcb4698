//go:build pprof

// Profiling for benchmarks only (docs/performance.md#profiling-the-watch):
// a binary built with -tags pprof writes a CPU profile of its first
// OPCTL_PROFILE_SECONDS (default 30) to $OPCTL_CPUPROFILE.PID, and a heap
// profile beside it (.heap), when that variable is set; a process that
// ends sooner writes none. The opctl that
// users run is built without the tag and carries none of it.
package cmd

import (
	"bytes"
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
	// In memory until the end: a process that exits before (a schema
	// check, a cron run) leaves no file.
	var buf bytes.Buffer
	if err := pprof.StartCPUProfile(&buf); err != nil {
		os.Stderr.WriteString("pprof: " + err.Error() + "\n")
		return
	}
	go func() {
		time.Sleep(time.Duration(secs) * time.Second)
		pprof.StopCPUProfile()
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			os.Stderr.WriteString("pprof: " + err.Error() + "\n")
			return
		}
		runtime.GC()
		if h, err := os.Create(path + ".heap"); err == nil {
			pprof.Lookup("allocs").WriteTo(h, 0)
			h.Close()
		}
		os.Stderr.WriteString("pprof: wrote " + path + "\n")
	}()
}
