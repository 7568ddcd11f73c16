package memcoord_test

import (
	"strconv"
	"testing"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/memcoord"
)

// BenchmarkFencedWrite measures one checkpoint-pointer publish through the
// in-process coordinator.
func BenchmarkFencedWrite(b *testing.B) {
	n := memcoord.NewCluster().Node()
	defer n.Close()
	ctx := b.Context()
	if err := n.Join(ctx, coord.Member{ID: "a"}); err != nil {
		b.Fatal(err)
	}
	l, err := n.Campaign(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := coord.PublishCheckpoint(ctx, l, coord.CheckpointPointer{ID: int64(i + 1), Location: "file:///cp/" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
}
