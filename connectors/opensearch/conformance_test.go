package opensearch

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
)

// confDoc is a test record as an OpenSearch document.
type confDoc struct {
	Split   int    `json:"split"`
	Seq     int64  `json:"seq"`
	Payload string `json:"payload"`
}

// sinkConf is the external system of one conformance case: an index of
// its own on the real node. Under exactly-once every document's id is
// "<split>-<seq>"; under at-least-once the sink runs with auto ids, so a
// replay may leave a record twice (which at-least-once allows).
type sinkConf struct {
	a     admin
	url   string
	index string
	g     connectortest.Guarantee
}

func (c *sinkConf) Sink() (sink.Sink[connectortest.Record], error) {
	opts := []SinkOption{BulkActions(500)}
	exactly := c.g == connectortest.ExactlyOnce
	if !exactly {
		opts = append(opts, DeliveryGuarantee(AtLeastOnce), AutoIDs())
	}
	return NewSink([]string{c.url}, func(r connectortest.Record, _ sink.Meta) (Action, error) {
		doc, err := json.Marshal(confDoc{Split: r.Split, Seq: r.Seq, Payload: r.Payload})
		a := Action{Index: c.index, Doc: doc}
		if exactly {
			a.ID = strconv.Itoa(r.Split) + "-" + strconv.FormatInt(r.Seq, 10)
		}
		return a, err
	}, opts...)
}

func (c *sinkConf) Value(r connectortest.Record) connectortest.Record { return r }

// Committed reads the whole index back (refresh, then scroll): what a
// searcher sees.
func (c *sinkConf) Committed() ([]connectortest.Record, error) {
	hits, err := c.a.readAll(c.index)
	if err != nil {
		return nil, err
	}
	out := make([]connectortest.Record, 0, len(hits))
	for _, h := range hits {
		var d confDoc
		if err := json.Unmarshal(h.Source, &d); err != nil {
			return nil, fmt.Errorf("document %s: %w", h.ID, err)
		}
		if c.g == connectortest.ExactlyOnce {
			if want := fmt.Sprintf("%d-%d", d.Split, d.Seq); h.ID != want {
				return nil, fmt.Errorf("document %s holds record %s", h.ID, want)
			}
		}
		out = append(out, connectortest.Record{Split: d.Split, Seq: d.Seq, Payload: d.Payload})
	}
	return out, nil
}

// Pending: the sink stages nothing; a document is either written or not.
func (c *sinkConf) Pending() ([]string, error) { return nil, nil }

func (c *sinkConf) Close() error {
	c.a.deleteIndex(c.index)
	return nil
}

// TestConformance runs connectortest's sink suite on the real node. The
// index has no order, so the suite compares sets (Unordered); the sink is
// idempotent rather than transactional, so a document is visible once
// its bulk request succeeded, before the checkpoint completes: the
// nothing-visible-before-commit case does not apply, and the
// cleanup-aborted cases (which fail writers right after PrepareCommit)
// have nothing to fail.
func TestConformance(t *testing.T) {
	const noPrepare = "the sink has no PrepareCommit and stages nothing, so nothing can be left to abort: the case's AfterPrepareCommit faults never fire for a plain writer"
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
			c := &sinkConf{a: a, url: base, index: uniqueIndex("conf"), g: s.Guarantee}
			err := a.createIndex(c.index, map[string]any{
				"split":   map[string]any{"type": "integer"},
				"seq":     map[string]any{"type": "long"},
				"payload": map[string]any{"type": "keyword"},
			})
			return c, err
		},
			connectortest.Unordered(),
			connectortest.CaseTimeout(2*time.Minute),
			connectortest.SkipCase("cleanup-aborted", noPrepare),
			connectortest.SkipCase("cleanup-aborted/full-failover", noPrepare),
			connectortest.SkipCase("cleanup-aborted/scale-down", noPrepare),
			connectortest.SkipCase("nothing-visible-before-commit", "idempotent sink: exactly-once comes from deterministic ids rewritten on replay, not from hiding data until the checkpoint completes"),
		)
	})
}
