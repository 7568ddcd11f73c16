package connectortest

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The correct in-memory connectors pass the whole suite.
func TestMemoryConnectorsPass(t *testing.T) {
	t.Run("source", func(t *testing.T) { TestSource(t, memSourceFactory(func(*memSource) {})) })
	t.Run("sink", func(t *testing.T) { TestSink(t, memSinkFactory(func(*memStore) {})) })
}

func TestSuiteDetectsReaderWithoutPosition(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, nil)
	runSource(ft, memSourceFactory(func(s *memSource) { s.forgetPosition = true }), &c)
	mustFail := []string{"failure-recovery", "resume/same-parallelism"}
	if !testing.Short() {
		mustFail = append(mustFail, "resume/scale-up", "resume/scale-down")
	}
	ft.rec.expect(t, mustFail, []string{"single-split", "multiple-splits", "idle-reader", "metrics"})
}

func TestSuiteDetectsEnumeratorForgettingIdleReaders(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, []Option{CaseTimeout(3 * time.Second)})
	c.only = map[string]bool{"single-split": true, "idle-reader": true}
	runSource(ft, memSourceFactory(func(s *memSource) { s.forgetIdle = true }), &c)
	// multiple-splits may fail too: a fast reader can take a slow one's
	// share, leaving it idle.
	ft.rec.expect(t, []string{"idle-reader"}, []string{"single-split"})
}

func TestSuiteDetectsSinkVisibleInPrepare(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, nil)
	runSink(ft, memSinkFactory(func(s *memStore) { s.visibleInPrepare = true }), &c)
	ft.rec.expect(t, []string{"nothing-visible-before-commit"}, []string{"write/exactly-once", "metrics", "recommit-restored"})
}

func TestSuiteDetectsCommitterFailingOnRecommit(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, nil)
	runSink(ft, memSinkFactory(func(s *memStore) { s.failOnRecommit = true }), &c)
	ft.rec.expect(t, []string{"recommit-restored", "failure/exactly-once/during-commit"},
		[]string{"write/exactly-once", "metrics", "nothing-visible-before-commit"})
}

// A sink that never aborts what failed attempts prepared fails every case
// that leaves a prepared transaction behind (writers failing right after
// PrepareCommit, in crash mode), and passes those without failures.
func TestSuiteDetectsSinkNeverAborting(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, nil)
	runSink(ft, memSinkFactory(func(s *memStore) { s.neverAbort = true }), &c)
	mustFail := []string{"cleanup-aborted", "cleanup-aborted/full-failover", "cleanup-aborted/scale-down", "failure/exactly-once/after-prepare"}
	if !testing.Short() {
		mustFail = append(mustFail, "failure/exactly-once/after-prepare/full-failover")
	}
	ft.rec.expect(t, mustFail, []string{"write/exactly-once", "metrics", "recommit-restored", "nothing-visible-before-commit",
		"restore/commit-in-flight", "restore/commit-in-flight-applied", "failure/exactly-once/between-prepare-and-commit", "failure/exactly-once/during-commit"})
}

// A sink that aborts its own subtask's leftovers but not those of subtasks
// that no longer exist fails the scale-down case only.
func TestSuiteDetectsSinkForgettingHigherSubtasks(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{ExactlyOnce}, nil)
	runSink(ft, memSinkFactory(func(s *memStore) { s.forgetHigher = true }), &c)
	ft.rec.expect(t, []string{"cleanup-aborted/scale-down"}, []string{"write/exactly-once", "metrics", "recommit-restored",
		"cleanup-aborted", "cleanup-aborted/full-failover", "failure/exactly-once/after-prepare", "restore/commit-in-flight", "restore/commit-in-flight-applied"})
}

// A sink without a committer (an idempotent upsert) prepares nothing, so
// the cases about prepared leftovers skip with the reason instead of
// failing, and the rest pass.
func TestSuiteSkipsPrepareCasesForSinkWithoutCommitter(t *testing.T) {
	ft := newFakeT(t)
	c := newConfig([]Guarantee{AtLeastOnce}, nil)
	runSink(ft, memUpsertFactory, &c)
	ft.rec.expect(t, nil, []string{"write/at-least-once", "resume/same-parallelism", "metrics"})
	ft.rec.mu.Lock()
	defer ft.rec.mu.Unlock()
	for _, n := range []string{"cleanup-aborted", "cleanup-aborted/full-failover", "cleanup-aborted/scale-down"} {
		reason, ok := ft.rec.skipped[n]
		if !ok {
			t.Errorf("case %q was not skipped for a sink without a committer (failed: %.300q)", n, ft.rec.failed[n])
		} else if !strings.Contains(reason, "no committer") {
			t.Errorf("case %q skipped for another reason: %s", n, reason)
		}
	}
	for n, msgs := range ft.rec.failed {
		t.Errorf("case %q failed for a correct sink without a committer: %.300q", n, msgs)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Split: 3, Seq: 42, Payload: payload(7, 3, 42)}
	got, err := ParseRecord(r.String())
	if err != nil || got != r {
		t.Fatalf("ParseRecord(%q) = %+v, %v; want %+v", r.String(), got, err, r)
	}
	for _, bad := range []string{"", "1/2", "x/2/p", "1/y/p"} {
		if _, err := ParseRecord(bad); err == nil {
			t.Errorf("ParseRecord(%q) succeeded, want an error", bad)
		}
	}
}

func TestCompare(t *testing.T) {
	want := [][]Record{generate(1, 0, 0, 3), generate(1, 1, 0, 3)}
	r := func(split int, seq int64) Record { return want[split][seq] }
	cases := []struct {
		name   string
		got    []Record
		e      expectation
		errHas []string // empty: no error
	}{
		{"equal", []Record{r(0, 0), r(1, 0), r(0, 1), r(1, 1), r(0, 2), r(1, 2)}, expect(ExactlyOnce, false), nil},
		{"missing", []Record{r(0, 0), r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(ExactlyOnce, false),
			[]string{"1 missing", "first missing record: split 0 seq 1"}},
		{"duplicate", []Record{r(0, 0), r(0, 1), r(0, 1), r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(ExactlyOnce, false),
			[]string{"1 duplicated", "first duplicated record: split 0 seq 1 at output positions 1 and 2"}},
		{"duplicate allowed", []Record{r(0, 0), r(0, 1), r(0, 0), r(0, 1), r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(AtLeastOnce, false), nil},
		{"out of order", []Record{r(0, 1), r(0, 0), r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(ExactlyOnce, false),
			[]string{"first out-of-order record: split 0 seq 0 at output position 1 after seq 1 at position 0"}},
		{"order ignored", []Record{r(0, 1), r(0, 0), r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(ExactlyOnce, true), nil},
		{"corrupted", []Record{r(0, 0), {Split: 0, Seq: 1, Payload: "x"}, r(0, 2), r(1, 0), r(1, 1), r(1, 2)}, expect(ExactlyOnce, false),
			[]string{"first corrupted record: split 0 seq 1"}},
		{"unexpected", []Record{r(0, 0), r(0, 1), r(0, 2), r(1, 0), r(1, 1), r(1, 2), {Split: 5, Seq: 1}}, expect(AtLeastOnce, false),
			[]string{"first unexpected record"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := compare(c.got, want, c.e)
			if len(c.errHas) == 0 {
				if err != nil {
					t.Fatalf("compare: %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("compare: no error, want one mentioning %q", c.errHas)
			}
			for _, s := range c.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("compare error %q does not mention %q", err, s)
				}
			}
		})
	}
}
