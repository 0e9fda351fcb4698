package reconcile

import "testing"

// SetWindowSlice sets the rows of one slice of a window's key-range pass
// for the rest of the test.
func SetWindowSlice(t testing.TB, n int64) {
	old := windowSlice
	windowSlice = n
	t.Cleanup(func() { windowSlice = old })
}
