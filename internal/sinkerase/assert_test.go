package sinkerase_test

import (
	"context"
	"testing"

	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

type txnSink struct{}

func (txnSink) CreateWriter(context.Context, sink.InitContext) (sink.CommittingWriter[int, string], error) {
	return nil, nil
}
func (txnSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[string], error) {
	return nil, nil
}
func (txnSink) CommittableSerializer() serde.Versioned[string] { return nil }

// TestConstructorsAreErased checks that the sinks package sink's
// constructors return implement the runtime's view themselves (Erase must
// not wrap them as plain sinks, which would drop their commits).
func TestConstructorsAreErased(t *testing.T) {
	s := sink.NewTwoPhase[int, string](txnSink{})
	if _, ok := s.(sinkerase.Sink[int]); !ok {
		t.Fatalf("%T does not implement sinkerase.Sink[int]", s)
	}
	if got := sinkerase.Erase(s).Describe(); got != "sinkerase_test.txnSink (two-phase)" {
		t.Fatalf("Describe = %q", got)
	}
}
