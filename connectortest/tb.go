package connectortest

import (
	"context"
	"testing"
)

// tb is what the suite needs from a test. *testing.T provides it through
// stdT; the suite's own tests provide a recording fake, so that they can
// assert which cases fail for a deliberately broken connector.
type tb interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Failed() bool
	Cleanup(func())
	Context() context.Context
	TempDir() string
	// Run runs f as a subtest and waits for it.
	Run(name string, f func(tb)) bool
}

// stdT adapts *testing.T to tb.
type stdT struct{ *testing.T }

func (t stdT) Run(name string, f func(tb)) bool {
	return t.T.Run(name, func(t *testing.T) { f(stdT{t}) })
}
