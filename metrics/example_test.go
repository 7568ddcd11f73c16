package metrics_test

import (
	"fmt"

	"github.com/sluice-io/sluice/metrics"
)

func ExampleRegistry() {
	reg := metrics.NewRegistry()
	g := reg.Root().With("operator", "orders").With("subtask", "0")
	g.Counter(metrics.NumRecordsIn).Add(1000)
	g.Gauge(metrics.PendingRecords, func() int64 { return 7 })
	for _, s := range reg.Snapshot() {
		fmt.Println(s.Name, s.Label("operator"), s.Value)
	}
	// Output:
	// numRecordsIn orders 1000
	// pendingRecords orders 7
}
