package readerbase

import "testing"

// SetTestHookEnqueued sets the hook called at the end of every hand-over
// of a task to a fetcher, until the test ends.
func SetTestHookEnqueued(t testing.TB, h func()) {
	testHookEnqueued = h
	t.Cleanup(func() { testHookEnqueued = nil })
}
