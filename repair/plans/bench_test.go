package plans

import "testing"

// BenchmarkRederive is what the rebuild adds to every apply: one Build from
// what the plan records, for each of the fuzz seed plans (every action
// type).
//
//	go test ./repair/plans -run '^$' -bench Rederive
func BenchmarkRederive(b *testing.B) {
	cfg := fuzzConfig()
	ps := fuzzPlans(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, fp := range ps {
			if err := Rederive(cfg, fp.plan); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ps)), "µs/plan")
}
