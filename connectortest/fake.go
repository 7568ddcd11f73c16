package connectortest

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
)

// fakeT is a recording tb: it runs the suite's cases as "subtests" of its
// own and records which failed and which were skipped, so that tests of the
// suite can assert the verdict for a broken connector without failing
// themselves.
type fakeT struct {
	real *testing.T // for logs
	name string
	rec  *recording

	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	cleanups []func()
	failed   bool
	skipped  bool
	msgs     []string
}

// recording holds the outcome of every case, by name.
type recording struct {
	mu      sync.Mutex
	failed  map[string][]string
	skipped map[string]string
	passed  []string
}

func newFakeT(t *testing.T) *fakeT {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return &fakeT{real: t, rec: &recording{failed: map[string][]string{}, skipped: map[string]string{}}, ctx: ctx, cancel: cancel}
}

func (f *fakeT) Helper()                  {}
func (f *fakeT) Name() string             { return f.name }
func (f *fakeT) Context() context.Context { return f.ctx }

func (f *fakeT) Logf(format string, args ...any) {
	f.real.Logf("%s: %s", f.name, fmt.Sprintf(format, args...))
}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.Errorf(format, args...)
	runtime.Goexit()
}

func (f *fakeT) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = true
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	f.cleanups = append(f.cleanups, fn)
	f.mu.Unlock()
}

func (f *fakeT) TempDir() string {
	dir, err := os.MkdirTemp("", "connectortest")
	if err != nil {
		f.Fatalf("TempDir: %v", err)
	}
	f.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (f *fakeT) Run(name string, fn func(tb)) bool {
	full := name
	if f.name != "" {
		full = f.name + "/" + name
	}
	ctx, cancel := context.WithCancel(f.ctx)
	c := &fakeT{real: f.real, name: full, rec: f.rec, ctx: ctx, cancel: cancel}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.finish()
		fn(c)
	}()
	<-done
	return !c.Failed()
}

// finish cancels the context, runs the cleanups and records the outcome.
func (f *fakeT) finish() {
	f.cancel()
	for {
		f.mu.Lock()
		n := len(f.cleanups)
		if n == 0 {
			f.mu.Unlock()
			break
		}
		fn := f.cleanups[n-1]
		f.cleanups = f.cleanups[:n-1]
		f.mu.Unlock()
		fn()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rec.mu.Lock()
	defer f.rec.mu.Unlock()
	switch {
	case f.failed:
		f.rec.failed[f.name] = f.msgs
	case f.skipped:
		f.rec.skipped[f.name] = f.msgs[len(f.msgs)-1]
	default:
		f.rec.passed = append(f.rec.passed, f.name)
	}
}

// ExpectSinkFailures runs the sink cases of [TestSink] against a
// deliberately broken sink, without failing t for the cases that fail, and
// fails t unless every case named in mustFail failed and every case named
// in mustPass passed. It proves that the suite catches a defect: break a
// copy of a connector in one way (for example, remove the recovery code
// that aborts leftover prepared transactions) and name the cases that must
// catch it. Case names are as printed by go test -v after the suite's test
// name, e.g. "cleanup-aborted/scale-down".
func ExpectSinkFailures[T any](t *testing.T, newContext func(SinkSettings) (SinkContext[T], error), mustFail, mustPass []string, opts ...Option) {
	t.Helper()
	c := newConfig([]Guarantee{ExactlyOnce, AtLeastOnce}, opts)
	ft := newFakeT(t)
	runSink(ft, newContext, &c)
	ft.rec.expect(t, mustFail, mustPass)
}

// expect fails t unless every case in mustFail failed and every case in
// mustPass passed.
func (r *recording) expect(t *testing.T, mustFail, mustPass []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range mustFail {
		if _, ok := r.failed[n]; !ok {
			t.Errorf("case %q did not fail for the broken connector (skipped: %q)", n, r.skipped[n])
		}
	}
	for _, n := range mustPass {
		if msgs, ok := r.failed[n]; ok {
			t.Errorf("case %q failed, want it to pass: %q", n, msgs)
		} else if reason, ok := r.skipped[n]; ok {
			t.Errorf("case %q skipped, want it to pass: %s", n, reason)
		}
	}
	for n, msgs := range r.failed {
		t.Logf("failed as expected or tolerated: %s: %.300q", n, msgs)
	}
}
