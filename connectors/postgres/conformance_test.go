package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
)

// confContext is one conformance case's external system: a table of its
// own, (id bigserial, split, seq, payload); id orders the rows as they were
// written, so that each split's order is checked.
type confContext[T any] struct {
	table string
	mk    func(table string) (sink.Sink[T], error)
	value func(connectortest.Record) T
}

func (c *confContext[T]) Sink() (sink.Sink[T], error)    { return c.mk(c.table) }
func (c *confContext[T]) Value(r connectortest.Record) T { return c.value(r) }
func (c *confContext[T]) Close() error                   { return nil }
func (c *confContext[T]) Pending() ([]string, error)     { return preparedGIDs(bg()) }
func (c *confContext[T]) Committed() ([]connectortest.Record, error) {
	type row struct {
		Split   int
		Seq     int64
		Payload string
	}
	rows, err := query[row](bg(), "SELECT split, seq, payload FROM "+c.table+" ORDER BY id")
	out := make([]connectortest.Record, len(rows))
	for i, r := range rows {
		out[i] = connectortest.Record{Split: r.Split, Seq: r.Seq, Payload: r.Payload}
	}
	return out, err
}

func bg() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = cancel // released by the timeout; the suite calls these from many goroutines
	return ctx
}

// noPrepare is why the at-least-once sink skips the cases of leftovers
// of PrepareCommit: its writers commit as they go and prepare nothing.
const noPrepare = "at-least-once: the writers prepare nothing (no PrepareCommit)"

var confCols = Columns("split", "seq", "payload")

func recordRow(r connectortest.Record) ([]any, error) {
	return []any{int32(r.Split), r.Seq, r.Payload}, nil
}

func recordMap(r connectortest.Record) map[string]any {
	return map[string]any{"split": int64(r.Split), "seq": r.Seq, "payload": r.Payload}
}

// TestConformance runs the conformance suite on the real server in
// exactly-once Append mode (a row mapper, COPY), exactly-once Upsert mode
// (map records, pipelined INSERT … ON CONFLICT in prepared transactions),
// at-least-once Append mode (autocommitted COPY into a table without a
// key: duplicates allowed) and at-least-once Upsert mode (autocommitted
// batches). At least once, the suite checks that the output contains the
// input; the upsert table holds each row once by its key.
func TestConformance(t *testing.T) {
	url := needServer(t)
	const defs = "id bigserial, split int NOT NULL, seq bigint NOT NULL, payload text NOT NULL, PRIMARY KEY (split, seq)"
	t.Run("exactly-once-append", func(t *testing.T) {
		connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
			return &confContext[connectortest.Record]{table: newTable(t, "conf_eo_append", defs),
				mk: func(table string) (sink.Sink[connectortest.Record], error) {
					return NewSink(url, table, recordRow, confCols)
				}, value: func(r connectortest.Record) connectortest.Record { return r }}, nil
		}, connectortest.Guarantees(connectortest.ExactlyOnce))
	})
	t.Run("exactly-once-upsert", func(t *testing.T) {
		connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[map[string]any], error) {
			return &confContext[map[string]any]{table: newTable(t, "conf_eo_upsert", defs),
				mk: func(table string) (sink.Sink[map[string]any], error) {
					return NewMapSink(url, table, confCols, WriteMode(Upsert))
				}, value: recordMap}, nil
		}, connectortest.Guarantees(connectortest.ExactlyOnce))
	})
	t.Run("at-least-once-append", func(t *testing.T) {
		const defs = "id bigserial, split int NOT NULL, seq bigint NOT NULL, payload text NOT NULL"
		connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
			return &confContext[connectortest.Record]{table: newTable(t, "conf_alo_append", defs),
				mk: func(table string) (sink.Sink[connectortest.Record], error) {
					return NewSink(url, table, recordRow, confCols, DeliveryGuarantee(AtLeastOnce))
				}, value: func(r connectortest.Record) connectortest.Record { return r }}, nil
		}, connectortest.Guarantees(connectortest.AtLeastOnce),
			connectortest.SkipCase("cleanup-aborted", noPrepare), connectortest.SkipCase("cleanup-aborted/full-failover", noPrepare),
			connectortest.SkipCase("cleanup-aborted/scale-down", noPrepare))
	})
	t.Run("at-least-once-upsert", func(t *testing.T) {
		connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[map[string]any], error) {
			return &confContext[map[string]any]{table: newTable(t, "conf_alo_upsert", defs),
				mk: func(table string) (sink.Sink[map[string]any], error) {
					return NewMapSink(url, table, confCols, WriteMode(Upsert), DeliveryGuarantee(AtLeastOnce))
				}, value: recordMap}, nil
		}, connectortest.Guarantees(connectortest.AtLeastOnce),
			connectortest.SkipCase("cleanup-aborted", noPrepare), connectortest.SkipCase("cleanup-aborted/full-failover", noPrepare),
			connectortest.SkipCase("cleanup-aborted/scale-down", noPrepare))
	})
}
