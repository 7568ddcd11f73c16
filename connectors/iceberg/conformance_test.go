package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
)

// confContext is one conformance case's table: a SQLite catalog and a
// warehouse in the case's temp dir, or a table in the REST catalog.
type confContext struct {
	cat   Catalog
	ident []string
	g     connectortest.Guarantee
	mu    sync.Mutex
}

func (c *confContext) Sink() (sink.Sink[connectortest.Record], error) {
	if c.g != connectortest.ExactlyOnce {
		return nil, fmt.Errorf("the iceberg sink is exactly-once only: %w", errors.ErrUnsupported)
	}
	return NewSink(c.cat, c.ident, testRow,
		CreateTable(testColumns, []PartitionField{{Column: "split", Transform: "identity"}}, nil),
		TargetFileSize(64<<10))
}

func (c *confContext) Value(r connectortest.Record) connectortest.Record { return r }

func (c *confContext) Committed() ([]connectortest.Record, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := readTable(context.Background(), c.cat, c.ident)
	return st.records, err
}

// Pending: data files of failed attempts are never referenced, but the
// sink leaves them on disk for Iceberg's orphan-file removal; they are
// not prepared transactions that a reader could ever see, so the suite's
// pending checks do not apply.
func (c *confContext) Pending() ([]string, error) {
	return nil, fmt.Errorf("unreferenced data files are left to orphan-file removal: %w", errors.ErrUnsupported)
}

func (c *confContext) Close() error { return nil }

func TestConformance(t *testing.T) {
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
		return &confContext{cat: testCatalog(s.TempDir), ident: []string{"conf", "records"}, g: s.Guarantee}, nil
	}, connectortest.Guarantees(connectortest.ExactlyOnce), connectortest.Unordered())
}
