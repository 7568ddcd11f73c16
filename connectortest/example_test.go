package connectortest_test

import (
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
)

func ExampleParseRecord() {
	r := connectortest.Record{Split: 2, Seq: 17, Payload: "k3x9"}
	line := r.String() // a ready-made encoding for string and []byte connectors
	back, err := connectortest.ParseRecord(line)
	fmt.Println(line, back == r, err)
	// Output: 2/17/k3x9 true <nil>
}

// storeContext presents a testsink.Store as the external system of a sink.
type storeContext struct {
	store *testsink.Store[connectortest.Record]
}

func (c storeContext) Sink() (sink.Sink[connectortest.Record], error) {
	return testsink.NewTwoPhase(c.store), nil
}
func (c storeContext) Value(r connectortest.Record) connectortest.Record { return r }
func (c storeContext) Committed() ([]connectortest.Record, error)        { return c.store.Committed(), nil }
func (c storeContext) Pending() ([]string, error)                        { return c.store.Staged(), nil }
func (c storeContext) Close() error                                      { return nil }

// A sink adopts the suite in one test function; each case gets a fresh
// external system.
func ExampleTestSink() {
	testConformance := func(t *testing.T) {
		connectortest.TestSink(t, func(connectortest.SinkSettings) (connectortest.SinkContext[connectortest.Record], error) {
			return storeContext{store: testsink.NewStore[connectortest.Record]()}, nil
		}, connectortest.Guarantees(connectortest.ExactlyOnce))
	}
	_ = testConformance // in a _test.go file: func TestConformance(t *testing.T)
}
