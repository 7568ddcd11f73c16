package memcoord_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/coord/coordtest"
	"github.com/sluice-io/sluice/internal/cluster/memcoord"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type harness struct{ c *memcoord.Cluster }

func (h harness) NewNode(t *testing.T) coord.Coordinator {
	n := h.c.Node()
	t.Cleanup(func() { _ = n.Close() })
	return n
}

func (h harness) Expire(t *testing.T, c coord.Coordinator) { h.c.Expire(c.(*memcoord.Node)) }

func TestConformance(t *testing.T) {
	coordtest.Run(t, func(t *testing.T) coordtest.Harness { return harness{memcoord.NewCluster()} })
}
