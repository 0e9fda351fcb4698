package mysql

import (
	"context"
	"testing"
)

// BenchmarkReadOperationSnapshot reads one operation at a time of 20,000
// (the lab's settlement pipelines, with hybridCases' data), with
// ReadOperation (its statements at once) and ReadOperationSnapshot (one
// transaction, its statements one after another): what a watch's confirm
// of one target costs against the read `where` does. It reports the
// statements per read; ns/op is per operation.
func BenchmarkReadOperationSnapshot(b *testing.B) {
	for _, c := range hybridCases()[:2] {
		b.Run(c.name, func(b *testing.B) {
			db, r := loadCase(b, c, benchOps)
			db.Exec(b, "ANALYZE TABLE "+analyzeTables(b, db))
			p := c.p(b)
			ctx := context.Background()
			for _, m := range []struct {
				name string
				read func(id string) error
			}{
				{"ReadOperation", func(id string) error { _, err := r.ReadOperation(ctx, p, "opctl_audit", id); return err }},
				{"ReadOperationSnapshot", func(id string) error {
					_, err := r.ReadOperationSnapshot(ctx, p, "opctl_audit", id)
					return err
				}},
			} {
				b.Run(m.name, func(b *testing.B) {
					i := 0
					for b.Loop() {
						i++
						if err := m.read(c.id(1 + i%benchOps)); err != nil && !isPartial(err) {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(r.Stats().Statements), "statements/read")
				})
			}
		})
	}
}
