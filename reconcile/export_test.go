// The package's knobs for its tests, which do not run in parallel: each
// sets a package variable for the rest of one test.
package reconcile

import "testing"

// SetSweepRows sets the entries of one page of a whole duplicates sweep
// for the rest of the test.
func SetSweepRows(t testing.TB, n int) {
	old := sweepRows
	sweepRows = n
	t.Cleanup(func() { sweepRows = old })
}

// SetWindowSlice sets the rows of one slice of a window's key-range pass
// for the rest of the test.
func SetWindowSlice(t testing.TB, n int64) {
	old := windowSlice
	windowSlice = n
	t.Cleanup(func() { windowSlice = old })
}
