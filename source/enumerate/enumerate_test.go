package enumerate_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// sp is a test split; N is its number, Pos a position a reader advanced.
type sp struct{ N, Pos int }

func (s sp) SplitID() string { return "s" + strconv.Itoa(s.N) }

func splits(ns ...int) []sp {
	out := make([]sp, len(ns))
	for i, n := range ns {
		out[i] = sp{N: n}
	}
	return out
}

func nums(ss []sp) []int {
	out := []int{}
	for _, s := range ss {
		out = append(out, s.N)
	}
	return out
}

// enum is what both enumerators offer the tests.
type enum interface {
	source.Enumerator[sp, any]
	Unassigned() []sp
}

type fixedAny struct{ *enumerate.Fixed[sp] }

func (f fixedAny) SnapshotState(id int64) (any, error) { return f.Fixed.SnapshotState(id) }

type discAny struct{ *enumerate.Discovered[sp] }

func (d discAny) SnapshotState(id int64) (any, error) { return d.Discovered.SnapshotState(id) }

func byOwner(s sp, p int) int { return s.N % p }

func byNum(a, b sp) int { return a.N - b.N }

// start registers the readers, starts e and adds each reader, as the
// runtime does.
func start(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], readers ...int) {
	t.Helper()
	c.Register(readers...)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, r := range readers {
		if err := e.AddReader(r); err != nil {
			t.Fatal(err)
		}
	}
}

// restart simulates a regional restart of subtask sub: the splits it got
// after the restore checkpoint come back, then it registers again.
func restart(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], sub int, back ...int) {
	t.Helper()
	c.Unregister(sub)
	if err := e.AddSplitsBack(splits(back...), sub); err != nil {
		t.Fatal(err)
	}
	c.Register(sub)
	if err := e.AddReader(sub); err != nil {
		t.Fatal(err)
	}
}

func request(t *testing.T, e enum, subs ...int) {
	t.Helper()
	for _, s := range subs {
		if err := e.HandleSplitRequest(s, "local"); err != nil {
			t.Fatal(err)
		}
	}
}

func assigned(c *fakes.EnumeratorContext[sp]) map[int][]int {
	out := map[int][]int{}
	for sub, ss := range c.Assigned {
		out[sub] = nums(ss)
	}
	return out
}

// TestFixed checks every assignment rule of Fixed against the fake
// enumerator context, step by step.
func TestFixed(t *testing.T) {
	cases := []struct {
		name     string
		parallel int
		splits   []int
		bounded  bool
		opts     []enumerate.Option[sp]
		steps    func(*testing.T, enum, *fakes.EnumeratorContext[sp])
		assigned map[int][]int // every assignment, per subtask, in order
		noMore   map[int]int   // SignalNoMoreSplits calls per subtask
		pending  []int         // Unassigned at the end
	}{{
		name: "pull/bounded: requests get splits in order, then no-more-splits", parallel: 2, splits: []int{0, 1, 2}, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			request(t, e, 0, 1, 0, 1, 0)
		},
		assigned: map[int][]int{0: {0, 2}, 1: {1}}, noMore: map[int]int{1: 1, 0: 1}, pending: []int{},
	}, {
		name: "pull/bounded: with no splits at all, every request gets no-more-splits; registering alone does not", parallel: 2, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			if len(c.NoMoreSplits) != 0 {
				t.Errorf("no-more-splits before any request: %v", c.NoMoreSplits)
			}
			request(t, e, 0, 1)
		},
		assigned: map[int][]int{}, noMore: map[int]int{0: 1, 1: 1}, pending: []int{},
	}, {
		name: "pull/bounded: a split added back is assigned to the next request, first", parallel: 2, splits: []int{0, 1, 2}, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			request(t, e, 0, 1)
			restart(t, e, c, 0, 0)
			request(t, e, 0, 0, 0)
		},
		assigned: map[int][]int{0: {0, 0, 2}, 1: {1}}, noMore: map[int]int{0: 1}, pending: []int{},
	}, {
		name: "pull/bounded: a reader that registers again after the pool emptied is told again when it asks", parallel: 2, splits: []int{0}, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			request(t, e, 0, 1, 0)
			restart(t, e, c, 1)
			request(t, e, 1)
		},
		assigned: map[int][]int{0: {0}}, noMore: map[int]int{0: 1, 1: 2}, pending: []int{},
	}, {
		name: "pull/unbounded: an empty pool keeps requests open and serves them when splits come back", parallel: 3, splits: []int{0}, bounded: false,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1, 2)
			request(t, e, 0, 1, 1, 2)
			restart(t, e, c, 0, 0) // 0's own request died with it; 1 waits longest
			request(t, e, 0)
		},
		assigned: map[int][]int{0: {0}, 1: {0}}, noMore: map[int]int{}, pending: []int{},
	}, {
		name: "pull: SortBy hands out the smallest split and puts returned ones back in order", parallel: 1, splits: []int{3, 1, 2}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.SortBy(byNum)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0)
			request(t, e, 0, 0)
			restart(t, e, c, 0, 2)
		},
		assigned: map[int][]int{0: {1, 2}}, noMore: map[int]int{}, pending: []int{2, 3},
	}, {
		name: "push/bounded: splits go to their owners at start, others are told no-more-splits", parallel: 3, splits: []int{0, 1, 3, 4}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1, 2)
			request(t, e, 0, 1, 2) // ignored
		},
		assigned: map[int][]int{0: {0, 3}, 1: {1, 4}}, noMore: map[int]int{0: 1, 1: 1, 2: 1}, pending: []int{},
	}, {
		name: "push/bounded: an owner that registers late gets its splits then", parallel: 2, splits: []int{0, 1}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0)
			c.Register(1)
			if err := e.AddReader(1); err != nil {
				t.Fatal(err)
			}
		},
		assigned: map[int][]int{0: {0}, 1: {1}}, noMore: map[int]int{0: 1, 1: 1}, pending: []int{},
	}, {
		name: "push/bounded: a restarted reader gets its splits back and no-more-splits again", parallel: 2, splits: []int{0, 1, 2}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			// The split comes back before the reader registers again:
			// nothing goes to the old, told instance.
			if err := e.AddSplitsBack(splits(2), 0); err != nil {
				t.Fatal(err)
			}
			if len(c.Assigned[0]) != 2 {
				t.Errorf("split 2 assigned before its reader registered again: %v", assigned(c))
			}
			if err := e.AddReader(0); err != nil {
				t.Fatal(err)
			}
			restart(t, e, c, 1) // nothing to give back: told again
		},
		assigned: map[int][]int{0: {0, 2, 2}, 1: {1}}, noMore: map[int]int{0: 2, 1: 2}, pending: []int{},
	}, {
		name: "push/unbounded: never signals, and a returned split goes back to its owner", parallel: 2, splits: []int{0, 1}, bounded: false,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			restart(t, e, c, 1, 1)
		},
		assigned: map[int][]int{0: {0}, 1: {1, 1}}, noMore: map[int]int{}, pending: []int{},
	}, {
		name: "push: nothing is assigned before Start", parallel: 1, splits: []int{0}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			c.Register(0)
			if err := e.AddReader(0); err != nil {
				t.Fatal(err)
			}
			if c.Assignments != 0 || len(c.NoMoreSplits) != 0 {
				t.Errorf("assigned or signalled before Start: %v %v", assigned(c), c.NoMoreSplits)
			}
			if err := e.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
		},
		assigned: map[int][]int{0: {0}}, noMore: map[int]int{0: 1}, pending: []int{},
	}, {
		name: "round-robin/bounded: splits go to the registered readers in turn", parallel: 3, splits: []int{5, 6, 7, 8}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.RoundRobin[sp]()},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
		},
		assigned: map[int][]int{0: {5, 7}, 1: {6, 8}}, noMore: map[int]int{0: 1, 1: 1}, pending: []int{},
	}, {
		name: "round-robin/bounded: a returned split waits for a reader that is not told", parallel: 2, splits: []int{0, 1}, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.RoundRobin[sp]()},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp]) {
			start(t, e, c, 0, 1)
			restart(t, e, c, 1, 1)
		},
		assigned: map[int][]int{0: {0}, 1: {1, 1}}, noMore: map[int]int{0: 1, 1: 2}, pending: []int{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakes.EnumeratorContext[sp]{Parallel: tc.parallel}
			b := source.ContinuousUnbounded
			if tc.bounded {
				b = source.Bounded
			}
			e := fixedAny{enumerate.NewFixed(c, splits(tc.splits...), b, tc.opts...)}
			tc.steps(t, e, c)
			if got := assigned(c); !maps.EqualFunc(got, tc.assigned, slices.Equal) {
				t.Errorf("assigned %v, want %v", got, tc.assigned)
			}
			if got := c.NoMoreSplits; !maps.Equal(got, tc.noMore) && (len(got) != 0 || len(tc.noMore) != 0) {
				t.Errorf("no-more-splits %v, want %v", got, tc.noMore)
			}
			if got := nums(e.Unassigned()); !slices.Equal(got, tc.pending) {
				t.Errorf("unassigned %v, want %v", got, tc.pending)
			}
			if c.Failed != nil {
				t.Errorf("FailJob(%v)", c.Failed)
			}
		})
	}
}

func TestFixedOwnerOutOfRange(t *testing.T) {
	c := &fakes.EnumeratorContext[sp]{Parallel: 2}
	e := enumerate.NewFixed(c, splits(0), source.Bounded, enumerate.Push(func(sp, int) int { return 2 }))
	c.Register(0, 1)
	if err := e.Start(context.Background()); err == nil {
		t.Fatal("Start: no error for an owner outside [0, parallelism)")
	}
}

// TestFixedSnapshotRestore checks that the state is the unassigned splits,
// with their positions, and that an enumerator restored from it hands out
// exactly those.
func TestFixedSnapshotRestore(t *testing.T) {
	c := &fakes.EnumeratorContext[sp]{Parallel: 1}
	e := enumerate.NewFixed(c, splits(0, 1, 2), source.Bounded)
	c.Register(0)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	request(t, fixedAny{e}, 0)
	if err := e.AddSplitsBack([]sp{{N: 0, Pos: 42}}, 0); err != nil {
		t.Fatal(err)
	}
	st, err := e.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if want := []sp{{N: 0, Pos: 42}, {N: 1}, {N: 2}}; !slices.Equal(st, want) {
		t.Fatalf("state %v, want %v", st, want)
	}
	c2 := &fakes.EnumeratorContext[sp]{Parallel: 1}
	r := fixedAny{enumerate.NewFixed(c2, st, source.Bounded)}
	start(t, r, c2, 0)
	request(t, r, 0, 0, 0, 0)
	if got := c2.AllAssigned(); !slices.Equal(got, st) || c2.NoMoreSplits[0] != 1 {
		t.Fatalf("restored enumerator assigned %v and signalled %v, want %v and 1", got, c2.NoMoreSplits, st)
	}
}

// runAsync runs the i-th recorded CallAsync once, as the runtime would.
func runAsync(t *testing.T, c *fakes.EnumeratorContext[sp], i int) {
	t.Helper()
	a := c.Async[i]
	res, err := a.Fn(context.Background())
	a.Handler(res, err)
}

// lister is a discovery function over a changing listing.
type lister struct {
	now   []sp
	err   error
	calls int
}

func (l *lister) discover(context.Context) ([]sp, error) {
	l.calls++
	return slices.Clone(l.now), l.err
}

func TestDiscovered(t *testing.T) {
	errList := errors.New("listing failed")
	cases := []struct {
		name     string
		parallel int
		bounded  bool
		interval time.Duration
		onError  func(error, int) error
		key      func(sp) string
		forget   bool
		prepare  func(context.Context, []sp, bool) ([]sp, error)
		state    enumerate.DiscoveredState[sp]
		opts     []enumerate.Option[sp]
		steps    func(*testing.T, enum, *fakes.EnumeratorContext[sp], *lister)
		assigned map[int][]int
		noMore   map[int]int
		async    int // CallAsync calls recorded
		failed   error
		state2   enumerate.DiscoveredState[sp] // SnapshotState at the end, positions ignored
	}{{
		name: "bounded/pull: requests wait for the one discovery, then no-more-splits", parallel: 2, bounded: true, interval: time.Minute,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0, 1)
			request(t, e, 0, 1)
			l.now = splits(0)
			runAsync(t, c, 0)
			request(t, e, 0)
		},
		assigned: map[int][]int{0: {0}}, noMore: map[int]int{1: 1, 0: 1}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0"}, Done: true},
	}, {
		name: "bounded/pull: a reader registering again after discovery is told again when it asks", parallel: 1, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			runAsync(t, c, 0) // nothing found
			request(t, e, 0)
			restart(t, e, c, 0)
			request(t, e, 0)
		},
		assigned: map[int][]int{}, noMore: map[int]int{0: 2}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Done: true},
	}, {
		name: "bounded: a restored, finished discovery is not run again", parallel: 1, bounded: true,
		state: enumerate.DiscoveredState[sp]{Pending: splits(4), Done: true},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			request(t, e, 0, 0)
		},
		assigned: map[int][]int{0: {4}}, noMore: map[int]int{0: 1}, async: 0,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s4"}, Done: true},
	}, {
		name: "unbounded/pull, ForgetGone: each discovery adds only unseen splits; forgotten keys come back", parallel: 1, interval: time.Second, forget: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			request(t, e, 0)
			l.now = splits(0, 1)
			runAsync(t, c, 0)
			request(t, e, 0, 0)
			l.now = splits(1, 2) // 0 vanished, 2 is new
			runAsync(t, c, 0)
			l.now = splits(0, 1, 2) // 0 is back: new again
			runAsync(t, c, 0)
			request(t, e, 0)
		},
		assigned: map[int][]int{0: {0, 1, 2, 0}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0", "s1", "s2"}, Done: true},
	}, {
		name: "unbounded: by default a key that vanished and came back is not new", parallel: 1, interval: time.Second,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.now = splits(0, 1)
			runAsync(t, c, 0)
			l.now = splits(1)
			runAsync(t, c, 0)
			l.now = splits(0, 1)
			runAsync(t, c, 0)
			request(t, e, 0, 0, 0)
		},
		assigned: map[int][]int{0: {0, 1}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0", "s1"}, Done: true},
	}, {
		name: "unbounded, Prepare: new splits are prepared (first only for the first), discoveries during a Prepare are dropped", parallel: 1, interval: time.Second,
		prepare: func(_ context.Context, fresh []sp, first bool) ([]sp, error) {
			out := slices.Clone(fresh)
			for i := range out {
				out[i].Pos = 100
				if first {
					out[i].Pos = 1
				}
			}
			return out, nil
		},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.now = splits(0)
			runAsync(t, c, 0) // starts Prepare: async call 1
			l.now = splits(0, 1)
			runAsync(t, c, 0) // dropped: a Prepare is under way
			st, _ := e.SnapshotState(1)
			if got := st.(enumerate.DiscoveredState[sp]); len(got.Known) != 0 || len(got.Pending) != 0 || got.Done {
				t.Errorf("state during the first Prepare: %+v, want empty", got)
			}
			runAsync(t, c, 1)
			runAsync(t, c, 0) // finds 1: async call 2
			runAsync(t, c, 2)
			request(t, e, 0, 0)
			if got := c.AllAssigned(); !slices.Equal(got, []sp{{0, 1}, {1, 100}}) {
				t.Errorf("assigned %v, want [{0 1} {1 100}]", got)
			}
		},
		assigned: map[int][]int{0: {0, 1}}, noMore: map[int]int{}, async: 3,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0", "s1"}, Done: true},
	}, {
		name: "bounded, Prepare: an error fails the job; no-more-splits is not sent", parallel: 1, bounded: true,
		prepare: func(context.Context, []sp, bool) ([]sp, error) { return nil, errList },
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.now = splits(0)
			runAsync(t, c, 0)
			runAsync(t, c, 1)
			request(t, e, 0)
		},
		assigned: map[int][]int{}, noMore: map[int]int{}, async: 2, failed: errList,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}},
	}, {
		name: "unbounded: restored known keys are not assigned again", parallel: 1, interval: time.Second,
		state: enumerate.DiscoveredState[sp]{Known: []string{"s0"}, Pending: splits(1)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.now = splits(0, 1, 2)
			runAsync(t, c, 0)
			request(t, e, 0, 0, 0)
		},
		assigned: map[int][]int{0: {1, 2}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0", "s1", "s2"}, Done: true},
	}, {
		name: "unbounded: splits sharing a key are all new together, and not again", parallel: 1, interval: time.Second, key: func(s sp) string { return strconv.Itoa(s.N / 10) },
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.now = splits(10, 11, 12)
			runAsync(t, c, 0)
			l.now = splits(10, 11, 12, 13, 20)
			runAsync(t, c, 0)
			request(t, e, 0, 0, 0, 0, 0)
		},
		assigned: map[int][]int{0: {10, 11, 12, 20}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"1", "2"}, Done: true},
	}, {
		name: "unbounded/push: discovered splits go to their owners", parallel: 2, interval: time.Second,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0, 1)
			l.now = splits(0, 1, 2)
			runAsync(t, c, 0)
		},
		assigned: map[int][]int{0: {0, 2}, 1: {1}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s0", "s1", "s2"}, Done: true},
	}, {
		name: "bounded/push: no-more-splits only after discovery", parallel: 2, bounded: true,
		opts: []enumerate.Option[sp]{enumerate.Push(byOwner)},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0, 1)
			if len(c.NoMoreSplits) != 0 {
				t.Errorf("signalled before discovery: %v", c.NoMoreSplits)
			}
			l.now = splits(1)
			runAsync(t, c, 0)
		},
		assigned: map[int][]int{1: {1}}, noMore: map[int]int{0: 1, 1: 1}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s1"}, Done: true},
	}, {
		name: "bounded: a failed discovery fails the job by default", parallel: 1, bounded: true,
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.err = errList
			runAsync(t, c, 0)
		},
		assigned: map[int][]int{}, noMore: map[int]int{}, async: 1, failed: errList,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}},
	}, {
		name: "bounded: OnError nil retries after RetryDelay, a later error fails", parallel: 1, bounded: true,
		onError: func(err error, n int) error {
			if n < 2 {
				return nil
			}
			return err
		},
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.err = errList
			runAsync(t, c, 0)
			if len(c.Async) != 2 || c.Async[1].Delay != time.Second || c.Failed != nil {
				t.Fatalf("after one failure: %d async calls, failed %v", len(c.Async), c.Failed)
			}
			runAsync(t, c, 1)
		},
		assigned: map[int][]int{}, noMore: map[int]int{}, async: 2, failed: errList,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}},
	}, {
		name: "unbounded: OnError nil waits for the next interval", parallel: 1, interval: time.Second,
		onError: func(error, int) error { return nil },
		steps: func(t *testing.T, e enum, c *fakes.EnumeratorContext[sp], l *lister) {
			start(t, e, c, 0)
			l.err = errList
			runAsync(t, c, 0)
			l.err, l.now = nil, splits(3)
			runAsync(t, c, 0)
			request(t, e, 0)
		},
		assigned: map[int][]int{0: {3}}, noMore: map[int]int{}, async: 1,
		state2: enumerate.DiscoveredState[sp]{Pending: []sp{}, Known: []string{"s3"}, Done: true},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakes.EnumeratorContext[sp]{Parallel: tc.parallel}
			b := source.ContinuousUnbounded
			if tc.bounded {
				b = source.Bounded
			}
			l := &lister{}
			d := enumerate.Discovery[sp]{Discover: l.discover, Interval: tc.interval, OnError: tc.onError, Key: tc.key, ForgetGone: tc.forget, Prepare: tc.prepare}
			de := enumerate.NewDiscovered(c, d, b, tc.state, tc.opts...)
			tc.steps(t, discAny{de}, c, l)
			if got := assigned(c); !maps.EqualFunc(got, tc.assigned, slices.Equal) {
				t.Errorf("assigned %v, want %v", got, tc.assigned)
			}
			if got := c.NoMoreSplits; !maps.Equal(got, tc.noMore) && (len(got) != 0 || len(tc.noMore) != 0) {
				t.Errorf("no-more-splits %v, want %v", got, tc.noMore)
			}
			if len(c.Async) != tc.async {
				t.Errorf("%d CallAsync calls, want %d", len(c.Async), tc.async)
			}
			if tc.async > 0 && tc.interval > 0 && !tc.bounded && c.Async[0].Period != tc.interval {
				t.Errorf("discovery period %v, want %v", c.Async[0].Period, tc.interval)
			}
			if !errors.Is(c.Failed, tc.failed) || (tc.failed == nil) != (c.Failed == nil) {
				t.Errorf("FailJob(%v), want %v", c.Failed, tc.failed)
			}
			st, err := de.SnapshotState(1)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(nums(st.Pending), nums(tc.state2.Pending)) || !slices.Equal(st.Known, tc.state2.Known) || st.Done != tc.state2.Done {
				t.Errorf("state %+v, want %+v", st, tc.state2)
			}
		})
	}
}

// TestFixedSplits checks the mixin: a fresh enumerator holds Splits, the
// state survives its serializer, and a restored enumerator holds the
// state's splits, with Bound and Assign applied to both.
func TestFixedSplits(t *testing.T) {
	f := &enumerate.FixedSplits[sp]{Splits: splits(0, 1), Bound: source.ContinuousUnbounded, Assign: []enumerate.Option[sp]{enumerate.Push(byOwner)}}
	if f.Boundedness() != source.ContinuousUnbounded {
		t.Fatalf("Boundedness %v", f.Boundedness())
	}
	c := &fakes.EnumeratorContext[sp]{Parallel: 2}
	c.Register(0, 1)
	e, err := f.CreateEnumerator(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := assigned(c); !maps.EqualFunc(got, map[int][]int{0: {0}, 1: {1}}, slices.Equal) || len(c.NoMoreSplits) != 0 {
		t.Fatalf("fresh: assigned %v, no-more-splits %v", got, c.NoMoreSplits)
	}
	ser := f.EnumeratorStateSerializer()
	b, err := ser.Serialize([]sp{{N: 3, Pos: 7}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := ser.Deserialize(ser.Version(), b)
	if err != nil {
		t.Fatal(err)
	}
	ss := f.SplitSerializer()
	if b, err := ss.Serialize(sp{N: 5, Pos: 9}); err != nil {
		t.Fatal(err)
	} else if s, err := ss.Deserialize(ss.Version(), b); err != nil || s != (sp{N: 5, Pos: 9}) {
		t.Fatalf("split round trip: %v, %v", s, err)
	}
	c2 := &fakes.EnumeratorContext[sp]{Parallel: 2}
	c2.Register(0, 1)
	r, err := f.RestoreEnumerator(c2, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c2.AllAssigned(); !slices.Equal(got, []sp{{N: 3, Pos: 7}}) || c2.Assigned[1] == nil {
		t.Fatalf("restored: assigned %v, want [{3 7}] pushed to subtask 1", c2.Assigned)
	}
}
