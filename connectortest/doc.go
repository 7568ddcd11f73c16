// Package connectortest is sluice's connector conformance suite, shaped
// like testing/fstest.TestFS: a connector hands in a factory for its
// external system, and [TestSource] or [TestSink] runs every property as a
// subtest — splits, idle readers, resuming and rescaling from a retained
// checkpoint, recovery from injected failures with output equal to input,
// nothing visible before a checkpoint completes, idempotent re-commits,
// clean-up of aborted attempts (writers that fail right after a pre-commit
// and are abandoned without Close, as by kill -9; regional and full
// failover; after a scale-down), restores from a checkpoint taken while a
// commit was in flight, metrics, goroutine leaks (-short: a quick
// subset). A case the connector cannot support is skipped with the reason:
// return an error wrapping errors.ErrUnsupported, or pass [SkipCase].
//
// The suite writes [Record] values (split, position, seeded payload); the
// context converts them to and from the connector's type:
//
//	type lines struct{ srv *myServer } // the external system, one per case
//
//	func (c *lines) Write(split int, rs []connectortest.Record) error {
//		for _, r := range rs {
//			c.srv.Append(split, r.String())
//		}
//		return nil
//	}
//	func (c *lines) Source() (source.Source[string, mysrc.Split, mysrc.State], error) {
//		return mysrc.New(c.srv.URL()), nil
//	}
//	func (c *lines) Record(v string) (connectortest.Record, error) { return connectortest.ParseRecord(v) }
//	func (c *lines) Close() error                                  { return c.srv.Close() }
//
//	func TestConformance(t *testing.T) {
//		connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[string, mysrc.Split, mysrc.State], error) {
//			return &lines{srv: newServer(s.Splits)}, nil
//		})
//	}
//
// A [SinkContext] returns the sink, converts records and reads back the
// committed view and the leftovers of aborted attempts. The suite needs only
// the standard library and sluice; connector tests should add goleak to
// their TestMain. [ExpectSinkFailures] runs the suite on a deliberately
// broken sink and checks which cases fail, to prove the suite catches the
// defect. docs/connector-howto.md walks through adoption.
package connectortest
