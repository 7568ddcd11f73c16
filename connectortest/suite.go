package connectortest

import (
	"context"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/faultinject"
)

// testCase is one property the suite checks, run as its own subtest.
type testCase struct {
	name string
	// long cases are skipped with -short.
	long bool
	run  func(t tb)
}

// savepointReason skips the cases that need savepoints.

func runCases(t tb, c *config, cases []testCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t tb) {
			if c.only != nil && !c.only[tc.name] {
				t.Skipf("not selected")
			}
			if reason, ok := c.skip[tc.name]; ok {
				t.Skipf("skipped by the connector: %s", reason)
			}
			if tc.long && testing.Short() {
				t.Skipf("not run with -short")
			}
			tc.run(t)
		})
	}
}

// closer closes an external context once, reporting an error.
type closer struct {
	once sync.Once
	fn   func() error
}

func (c *closer) close(t tb) {
	c.once.Do(func() {
		if err := c.fn(); err != nil {
			t.Errorf("close the external context: %v", err)
		}
	})
}

func newCloser(t tb, fn func() error) *closer {
	c := &closer{fn: fn}
	t.Cleanup(func() { c.close(t) })
	return c
}

// leakCheck returns a function that fails t if more goroutines run than
// when leakCheck was called, after waiting up to 5 s for them to end.
func leakCheck(t tb) func() {
	before := goruntime.NumGoroutine()
	return func() {
		t.Helper()
		var now int
		ok := waitFor(context.Background(), 5*time.Second, func() bool {
			now = goruntime.NumGoroutine()
			return now <= before
		})
		if !ok {
			buf := make([]byte, 1<<20)
			buf = buf[:goruntime.Stack(buf, true)]
			t.Errorf("goroutine leak: %d goroutines before the job, %d five seconds after it ended and the context closed:\n%s", before, now, buf)
		}
	}
}

// requireFired fails t if no planned fault fired: the case then proved
// nothing about recovery.
func requireFired(t tb, p *faultinject.Plan) {
	t.Helper()
	if len(p.Fired()) == 0 {
		t.Errorf("no injected fault fired (plan %v): the job was too short to test recovery; raise RecordsPerSplit", p)
	}
}
