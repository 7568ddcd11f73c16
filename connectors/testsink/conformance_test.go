package testsink_test

import (
	"testing"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
)

// storeContext is a testsink.Store seen as an external system.
type storeContext struct {
	g      connectortest.Guarantee
	global bool
	store  *testsink.Store[connectortest.Record]
}

// Sink is the two-phase sink for exactly-once and the collect sink (it
// appends at every flush) for at-least-once.
func (c *storeContext) Sink() (sink.Sink[connectortest.Record], error) {
	switch {
	case c.g == connectortest.AtLeastOnce:
		return testsink.NewCollect(c.store), nil
	case c.global:
		return testsink.NewTwoPhase(c.store, testsink.WithGlobalCommit()), nil
	}
	return testsink.NewTwoPhase(c.store), nil
}

func (c *storeContext) Value(r connectortest.Record) connectortest.Record { return r }
func (c *storeContext) Committed() ([]connectortest.Record, error)        { return c.store.Committed(), nil }
func (c *storeContext) Pending() ([]string, error)                        { return c.store.Staged(), nil }
func (c *storeContext) Close() error                                      { return nil }

func TestConformance(t *testing.T) {
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
		return &storeContext{g: s.Guarantee, store: testsink.NewStore[connectortest.Record]()}, nil
	})
}

func TestConformanceWithGlobalCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("the plain two-phase sink covers -short")
	}
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
		return &storeContext{g: s.Guarantee, global: true, store: testsink.NewStore[connectortest.Record]()}, nil
	}, connectortest.Guarantees(connectortest.ExactlyOnce))
}
