package config

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed presets/*.yaml
var presets embed.FS

// PresetNames lists the presets of `opctl init --preset`.
func PresetNames() []string {
	return []string{"settlement", "fulfilment", "skip", "seed000", "seed001", "seed003"}
}

// Preset returns the opctl.yaml of a preset: a pipeline of one of the seed
// incidents, on the recommended schema (`opctl schema print`: settlement,
// fulfilment, skip) or on the seed's own schema, unmodified (seed000,
// seed001, seed003: testdata/schema/seed*.sql; docs/config.md#presets).
func Preset(name string) ([]byte, error) {
	b, err := presets.ReadFile("presets/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no preset %q (presets: %s)", name, strings.Join(PresetNames(), ", "))
	}
	return b, nil
}
