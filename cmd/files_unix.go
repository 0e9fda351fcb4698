//go:build unix

package cmd

import "syscall"

// oNoFollow makes an open fail on a symbolic link in the last component.
const oNoFollow = syscall.O_NOFOLLOW
