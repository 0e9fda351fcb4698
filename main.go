// Command opctl finds and repairs half-completed Kafka consumer operations.
package main

import (
	"os"

	"github.com/opctl-dev/opctl/cmd"
)

func main() { os.Exit(cmd.Main()) }
