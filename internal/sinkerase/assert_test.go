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

type stateSink struct{}

func (stateSink) CreateWriter(context.Context, sink.InitContext) (sink.StatefulWriter[int, string], error) {
	return nil, nil
}
func (stateSink) RestoreWriter(context.Context, sink.InitContext, []string) (sink.StatefulWriter[int, string], error) {
	return nil, nil
}
func (stateSink) WriterStateSerializer() serde.Versioned[string] { return nil }

type bothSink struct{ txnSink }

func (bothSink) CreateWriter(context.Context, sink.InitContext) (sink.StatefulCommittingWriter[int, string, string], error) {
	return nil, nil
}
func (bothSink) RestoreWriter(context.Context, sink.InitContext, []string) (sink.StatefulCommittingWriter[int, string, string], error) {
	return nil, nil
}
func (bothSink) WriterStateSerializer() serde.Versioned[string] { return nil }

type plainSink struct{}

func (plainSink) CreateWriter(context.Context, sink.InitContext) (sink.Writer[int], error) {
	return nil, nil
}

// TestConstructorsAreErased checks that the sinks package sink's
// constructors return implement the runtime's view themselves (Erase must
// not wrap them as plain sinks, which would drop their commits and
// states), and that a plain sink is wrapped.
func TestConstructorsAreErased(t *testing.T) {
	for _, c := range []struct {
		s    sink.Sink[int]
		want string
	}{
		{sink.NewTwoPhase[int, string](txnSink{}), "sinkerase_test.txnSink (two-phase)"},
		{sink.NewStateful[int, string](stateSink{}), "sinkerase_test.stateSink (stateful)"},
		{sink.NewStatefulTwoPhase[int, string, string](bothSink{}), "sinkerase_test.bothSink (two-phase) (stateful)"},
		{plainSink{}, "sinkerase_test.plainSink"},
	} {
		_, erased := c.s.(sinkerase.Sink[int])
		if _, plain := c.s.(plainSink); erased == plain {
			t.Errorf("%T implements sinkerase.Sink[int]: %v", c.s, erased)
		}
		if got := sinkerase.Erase(c.s).Describe(); got != c.want {
			t.Errorf("Describe = %q, want %q", got, c.want)
		}
	}
}

// TestNilWriter: a sink that returns a nil writer without an error fails
// the writer's creation instead of the first Write.
func TestNilWriter(t *testing.T) {
	for _, s := range []sink.Sink[int]{sink.NewTwoPhase[int, string](txnSink{}), sink.NewStateful[int, string](stateSink{}), plainSink{}} {
		if _, _, err := sinkerase.Erase(s).NewWriter(context.Background(), nil, nil); err == nil {
			t.Errorf("%T: no error for a nil writer", s)
		}
	}
}
