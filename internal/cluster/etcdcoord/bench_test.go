package etcdcoord_test

import (
	"strconv"
	"testing"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

// BenchmarkFencedWrite measures one checkpoint-pointer publish (a fenced
// etcd Txn, fsynced by etcd) against a 1-member embedded etcd: the
// coordination cost each completed checkpoint pays.
func BenchmarkFencedWrite(b *testing.B) {
	ec := startEtcd(b, 1)
	n, err := etcdcoord.New(b.Context(), ec.endpoints())
	if err != nil {
		b.Fatal(err)
	}
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
