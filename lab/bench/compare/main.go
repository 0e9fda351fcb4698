// Command compare checks a reconcile targets file (JSONL) against a lab/gen
// manifest: every seeded anomaly of severity "action" (that needs no Kafka
// unless -kafka) must be a target with the same pipeline, check, verdict and
// step, and nothing else. It prints one line and exits 1 on a difference.
//
//	go run ./bench/compare -manifest manifest.json -targets targets.jsonl [-check skipped]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"

	"github.com/opctl-dev/opctl/lab/gen"
	"github.com/opctl-dev/opctl/reconcile"
)

func main() {
	manifest := flag.String("manifest", "manifest.json", "lab/gen manifest")
	targets := flag.String("targets", "targets.jsonl", "reconcile --out file")
	check := flag.String("check", "", "only this check")
	kafka := flag.Bool("kafka", false, "expect the anomalies that need Kafka too")
	flag.Parse()
	if err := run(*manifest, *targets, *check, *kafka); err != nil {
		fmt.Fprintln(os.Stderr, "compare:", err)
		os.Exit(1)
	}
}

func run(manifest, targets, check string, kafka bool) error {
	b, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	var m gen.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("%s: %w", manifest, err)
	}
	want := map[string]bool{}
	for _, a := range m.Expected("", check) {
		if a.Severity == "action" && (kafka || !a.NeedsKafka) {
			want[fmt.Sprintf("%s|%s|%s|%s|%s", a.Pipeline, a.Check, a.BizID, a.Verdict, a.Step)] = true
		}
	}
	f, err := os.Open(targets)
	if err != nil {
		return err
	}
	defer f.Close()
	got := map[string]bool{}
	dup := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var t reconcile.Target
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return fmt.Errorf("%s: %w", targets, err)
		}
		k := fmt.Sprintf("%s|%s|%s|%s|%s", t.Pipeline, t.Check, t.BizID, t.Verdict, t.Step)
		if got[k] {
			dup++
		}
		got[k] = true
	}
	if err := sc.Err(); err != nil {
		return err
	}
	var missed, extra []string
	for k := range want {
		if !got[k] {
			missed = append(missed, k)
		}
	}
	for k := range got {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missed)
	sort.Strings(extra)
	fmt.Printf("%d seeded, %d found, %d missed, %d false positives, %d duplicates\n", len(want), len(got), len(missed), len(extra), dup)
	if len(missed)+len(extra)+dup > 0 {
		for i, k := range missed {
			if i == 5 {
				break
			}
			fmt.Println("  missed:", k)
		}
		for i, k := range extra {
			if i == 5 {
				break
			}
			fmt.Println("  false positive:", k)
		}
		return fmt.Errorf("targets differ from the manifest")
	}
	return nil
}
