//go:build !failpoint

package repair

import "github.com/opctl-dev/opctl/sources"

// failpoints returns the write path unchanged: the test-only failpoints
// (failpoint.go, built with -tags failpoint) are not in this binary.
func failpoints(st sources.Store, pub Publisher, post sources.Poster) (sources.Store, Publisher, sources.Poster) {
	return st, pub, post
}
