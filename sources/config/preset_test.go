package config

import "testing"

// Every preset must load as it is written, with nothing set in the
// environment, so that `opctl init` never writes a config opctl refuses.
func TestPresetsLoad(t *testing.T) {
	for _, name := range PresetNames() {
		b, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := ParseWithEnv(name+".yaml", b, nil)
		if err != nil {
			t.Fatalf("preset %s: %v", name, err)
		}
		if len(cfg.Pipelines) != 1 {
			t.Errorf("preset %s: %d pipelines", name, len(cfg.Pipelines))
		}
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("unknown preset accepted")
	}
}
