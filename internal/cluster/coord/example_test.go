package coord_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/memcoord"
)

// A node joins, wins the election, completes a checkpoint with a fenced
// write, and loses its term: its later writes are refused.
func Example() {
	ctx := context.Background()
	cluster := memcoord.NewCluster() // etcdcoord.New(ctx, endpoints) for etcd
	a, b := cluster.Node(), cluster.Node()
	defer a.Close()
	defer b.Close()
	_ = a.Join(ctx, coord.Member{ID: "a", Addr: "127.0.0.1:7001"})
	_ = b.Join(ctx, coord.Member{ID: "b", Addr: "127.0.0.1:7002"})

	la, _ := a.Campaign(ctx)
	_ = coord.PublishCheckpoint(ctx, la, coord.CheckpointPointer{ID: 1, Location: "file:///cp/1"})

	cluster.Expire(a) // a was paused past its lease TTL
	lb, _ := b.Campaign(ctx)
	_ = coord.PublishCheckpoint(ctx, lb, coord.CheckpointPointer{ID: 2, Location: "file:///cp/2"})

	err := coord.PublishCheckpoint(ctx, la, coord.CheckpointPointer{ID: 3, Location: "file:///cp/3"})
	fmt.Println("old leader fenced:", errors.Is(err, coord.ErrFenced))
	p, _, _ := coord.LatestCheckpoint(ctx, b)
	fmt.Println("latest checkpoint:", p.ID, p.Location)
	// Output:
	// old leader fenced: true
	// latest checkpoint: 2 file:///cp/2
}
