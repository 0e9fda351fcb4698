//go:build !linux

package testenv

import "os/exec"

// dieWithParent does nothing where the kernel cannot signal a child when
// its parent dies: Stop is then the only cleanup.
func dieWithParent(*exec.Cmd) {}
