package storetest

import (
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/audit"
)

// BenchAuditFilter reads the first page of filters over log, a trail
// whose newest entry is at last: one that matches often (every entry),
// one of one stack, one rarer (a stack and an actor), one that matches
// nothing (every entry is read), and a recent Since that ends the scan
// early. Each reports its mean time as ms/op.
func BenchAuditFilter(b *testing.B, log audit.Log, last time.Time) {
	for _, tc := range []struct {
		name string
		f    audit.Filter
	}{
		{"all", audit.Filter{}},
		{"stack", audit.Filter{Stack: "stack-7"}},
		{"stack+actor", audit.Filter{Stack: "stack-7", Actor: "user7"}},
		{"none", audit.Filter{Stack: "gone"}},
		{"none-since-1h", audit.Filter{Stack: "gone", Since: last.Add(-time.Hour)}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				if _, err := log.Audit(tc.f); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}
