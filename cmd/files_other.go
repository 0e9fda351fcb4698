//go:build !unix

package cmd

// oNoFollow: no such open flag here; createAtomic's Lstat of the path is
// the check.
const oNoFollow = 0
