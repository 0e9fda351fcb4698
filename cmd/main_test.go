package cmd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the opctl binary the crash tests build (buildOpctl), so
// that test runs leave no temp dirs behind.
func TestMain(m *testing.M) {
	code := m.Run()
	for _, bin := range opctlBins {
		os.RemoveAll(filepath.Dir(bin))
	}
	os.Exit(code)
}
