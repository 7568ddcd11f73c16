package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// placeMode says where a test job's subtasks run.
type placeMode int

const (
	inProcess placeMode = iota // no Placement: the engine as it always ran
	oddRemote                  // hosts local and a loopback: odd regions on the loopback
	allRemote                  // only a loopback host: every subtask on it
)

func (m placeMode) String() string { return [...]string{"in-process", "odd-remote", "all-remote"}[m] }

// executePlaced builds env's job, places it per mode on loopback task hosts
// (every message through its wire form), runs it and closes the host. In
// the remote modes some subtasks must have been deployed on the loopback.
func executePlaced(ctx context.Context, t *testing.T, env *stream.Environment, name string, mode placeMode) (*engine.Result, error) {
	t.Helper()
	j, err := env.Build(name)
	if err != nil {
		return nil, err
	}
	if mode == inProcess {
		return j.Run(ctx)
	}
	lb := placeOnLoopback(t, j, mode)
	res, err := j.Run(ctx)
	if lb.Deployed() == 0 {
		t.Errorf("%s: no subtask was deployed on the loopback host", mode)
	}
	return res, err
}

// placeOnLoopback gives j a loopback host per mode; the test closes it.
func placeOnLoopback(t *testing.T, j *engine.Job, mode placeMode) *engine.Loopback {
	lb := engine.NewLoopback("loopback", engine.DiscardLogger())
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("loopback host: %v", err)
		}
	})
	hosts := engine.Hosts{engine.Local, lb}
	if mode == allRemote {
		hosts = engine.Hosts{lb}
	}
	engine.SetPlacement(j, hosts, faultinject.ErrInjected)
	return lb
}

// TestExactlyOnceRemote runs the exactly-once matrix of
// TestExactlyOnceUnderFailures with subtasks on a loopback task host: every
// mail, acknowledgement, split, committable and failure crosses the
// engine's seam in its wire form. Jobs of several regions put the odd
// ones there; a job with a rebalance (one region) runs wholly there. The
// results must be the same: output equals input after every injected
// failure.
func TestExactlyOnceRemote(t *testing.T) {
	cases := []chaosCase{
		{seed: 1, faults: 6, place: oddRemote}, {seed: 2, faults: 6, rebalance: true, place: allRemote},
		{seed: 3, faults: 6, place: allRemote}, {seed: 4, faults: 6, rebalance: true, place: allRemote},
		{seed: 5, faults: 6, full: true, place: oddRemote},
	}
	count := int64(60_000)
	if testing.Short() {
		cases, count = cases[:2], 20_000
	}
	fired := 0
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed=%d/%s", c.seed, c.place), func(t *testing.T) {
			fired += runChaos(t, c, count)
		})
	}
	if !testing.Short() && fired < 20 {
		t.Errorf("only %d injected failures fired over all seeds, want at least 20", fired)
	}
}

// TestRegionalFailoverRemote is TestRegionalFailover with the regions on
// task hosts: the failing region 2 on the coordinator's process (odd
// regions remote), or on the loopback host with everything else, where it
// restarts (its host is live).
func TestRegionalFailoverRemote(t *testing.T) {
	for _, mode := range []placeMode{oddRemote, allRemote} {
		for _, chained := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/chained=%v", mode, chained), func(t *testing.T) { regionalFailoverPlaced(t, chained, mode) })
		}
	}
}

// halfHeld returns 2×parallelism splits of 3000 records and a source of
// them whose odd splits (s1, s3, …) are held until release is closed, so
// that a job cannot end before the test's disruption.
func halfHeld(parallelism int) (splits []rangeSplit, src *scriptSource, release chan struct{}) {
	for i := range 2 * parallelism {
		splits = append(splits, rangeSplit{ID: fmt.Sprintf("s%d", i), End: 3000})
	}
	release = make(chan struct{})
	src = &scriptSource{splits: splits, pull: true, perPoll: 20,
		hold: func(_ int64, sp rangeSplit) bool {
			select {
			case <-release:
				return false
			default:
				return sp.ID[1]%2 == 1
			}
		}}
	return splits, src, release
}

// TestRemoteHostLost: a job of four regions on the coordinator's process
// and a loopback host (odd regions there). Once checkpoints completed, the
// loopback's link is cut, as a node that died: its subtasks fail with
// ErrHostLost, their regions restart from the latest checkpoint on the
// host that remains, and the output equals the input. Half of the splits
// are held until the cut, so the job cannot end before it.
func TestRemoteHostLost(t *testing.T) {
	const parallelism = 4
	splits, src, cut := halfHeld(parallelism)
	store := testsink.NewStore[rec]()
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.FixedDelay(4, 0)), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "script"), testsink.NewTwoPhase(store), "sink")
	j, err := env.Build("host-lost")
	if err != nil {
		t.Fatal(err)
	}
	lb := placeOnLoopback(t, j, oddRemote)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h := j.Start(ctx)
	waitCheckpoints(t, h, 3)
	lb.Cut()
	close(cut)
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(lb.Err(), engine.ErrHostLost) {
		t.Errorf("loopback host: error %v, want one wrapping ErrHostLost", lb.Err())
	}
	lost := 0
	for _, f := range res.Failures {
		if !errors.Is(f, engine.ErrHostLost) {
			t.Errorf("restart caused by %v, not by the lost host", f)
		}
		lost++
	}
	if lost != 2 {
		t.Errorf("%d restarts for the lost host, want 2 (its two regions): %v", lost, res.Failures)
	}
	expectExactlyOnce(t, splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}

// tagged serializes the test's events (greet, answer) for other hosts.
type taggedEvents struct{}

func (taggedEvents) Version() int { return 1 }

func (taggedEvents) Serialize(e source.Event) ([]byte, error) {
	switch e := e.(type) {
	case greet:
		b, err := json.Marshal(e)
		return append([]byte{'g'}, b...), err
	case answer:
		b, err := json.Marshal(e)
		return append([]byte{'a'}, b...), err
	}
	return nil, fmt.Errorf("unknown event %T", e)
}

func (taggedEvents) Deserialize(_ int, b []byte) (source.Event, error) {
	if len(b) == 0 {
		return nil, errors.New("empty event")
	}
	switch b[0] {
	case 'g':
		var g greet
		return g, json.Unmarshal(b[1:], &g)
	case 'a':
		var a answer
		return a, json.Unmarshal(b[1:], &a)
	}
	return nil, fmt.Errorf("unknown event tag %q", b[0])
}

// serializingEventSource is eventSource with an event serializer.
type serializingEventSource struct{ *eventSource }

func (serializingEventSource) EventSerializer() serde.Versioned[source.Event] { return taggedEvents{} }

// TestSourceEventsRemote: enumerator events reach readers on a loopback
// host and their answers come back, through the source's event
// serializer; without one, the job fails saying that events cannot cross
// hosts.
func TestSourceEventsRemote(t *testing.T) {
	t.Run("serializer", func(t *testing.T) {
		src := &eventSource{splits: 5}
		store := testsink.NewStore[rec]()
		env := stream.New(stream.Parallelism(3), stream.Logger(engine.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, serializingEventSource{src}, watermark.None[rec](), "events"), testsink.NewTwoPhase(store), "sink")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if _, err := executePlaced(ctx, t, env, "events", allRemote); err != nil {
			t.Fatal(err)
		}
		if g, a := src.greetings.Load(), src.answers.Load(); g != 3 || a != 3 {
			t.Errorf("got %d greetings and %d answers, want 3 and 3", g, a)
		}
		var want []rangeSplit
		for i := range 5 {
			want = append(want, rangeSplit{ID: fmt.Sprint("d", i), End: 50})
		}
		expectExactlyOnce(t, want, store.Committed())
	})
	t.Run("no serializer", func(t *testing.T) {
		env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, &eventSource{splits: 2}, watermark.None[rec](), "events"), testsink.NewTwoPhase(testsink.NewStore[rec]()), "sink")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		_, err := executePlaced(ctx, t, env, "events", oddRemote)
		if err == nil || !strings.Contains(err.Error(), "no event serializer") {
			t.Fatalf("got %v, want a failure saying the source has no event serializer", err)
		}
	})
}

// TestNoLiveHost: a job whose only task host is lost cannot be placed; it
// fails saying so.
func TestNoLiveHost(t *testing.T) {
	env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()))
	src := &scriptSource{splits: []rangeSplit{{ID: "a", End: 10}}, pull: true}
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "script"), testsink.NewTwoPhase(testsink.NewStore[rec]()), "sink")
	j, err := env.Build("no-host")
	if err != nil {
		t.Fatal(err)
	}
	lb := engine.NewLoopback("gone", engine.DiscardLogger())
	if err := lb.Close(); err != nil {
		t.Fatal(err)
	}
	engine.SetPlacement(j, engine.Hosts{lb})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := j.Run(ctx); err == nil || !strings.Contains(err.Error(), "no live task host") {
		t.Fatalf("got %v, want a failure saying no task host is live", err)
	}
}

// TestStopAndResumeRemote: an unbounded job with its odd regions on a
// loopback host is stopped (its final checkpoint goes through the seam:
// the stop's triggers, acknowledgements, commits, shutdown), then resumed
// from that checkpoint with every subtask on a loopback host (restored
// state deployed through the seam) and stopped again. Each split's
// committed records are its sequence from the start, once, in order.
func TestStopAndResumeRemote(t *testing.T) {
	const splits = 4
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(splits), datagen.PushAssignment(), datagen.RatePerSecond(20_000))
	store := testsink.NewStore[int64]()
	var restore *checkpoint.Snapshot
	committed := 0
	for run, mode := range []placeMode{oddRemote, allRemote} {
		opts := []stream.Option{stream.Parallelism(splits), stream.CheckpointEvery(50 * time.Millisecond), stream.Logger(engine.DiscardLogger())}
		if restore != nil {
			opts = append(opts, stream.RestoreFrom(restore))
		}
		env := stream.New(opts...)
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
		j, err := env.Build(fmt.Sprintf("stop-resume-%d", run))
		if err != nil {
			t.Fatal(err)
		}
		lb := placeOnLoopback(t, j, mode)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		h := j.Start(ctx)
		waitCheckpoints(t, h, 3)
		res, err := h.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if !res.Stopped || lb.Deployed() == 0 {
			t.Fatalf("run %d: stopped %v, %d subtasks deployed on the loopback host", run, res.Stopped, lb.Deployed())
		}
		restore = h.Latest()
		if n := len(store.Committed()); n <= committed {
			t.Fatalf("run %d committed nothing (%d records in all)", run, n)
		} else {
			committed = n
		}
	}
	next := make([]int64, splits)
	for s := range next {
		next[s] = int64(s)
	}
	got := store.Committed()
	for _, v := range got {
		s := v % splits
		if v != next[s] {
			t.Fatalf("split %d: got %d, want %d (a record missing, duplicated or out of order)", s, v, next[s])
		}
		next[s] += splits
	}
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
	t.Logf("%d records committed exactly once over two runs", len(got))
}

// leftSink's writers block in CreateWriter until their ctx is cancelled,
// then close left.
type leftSink struct {
	blockedStartSink
	left chan struct{}
}

func (s *leftSink) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[int64], error) {
	w, err := s.blockedStartSink.CreateWriter(ctx, ic)
	close(s.left)
	return w, err
}

// TestCancelWhileDeployingRemote: a job whose only subtask is being built
// on a loopback host, in a writer that blocks until cancelled, is
// cancelled: the end of its session reaches the host although the host is
// busy building, and cancels the build (the host's link stays up).
func TestCancelWhileDeployingRemote(t *testing.T) {
	snk := &leftSink{blockedStartSink: blockedStartSink{entered: make(chan struct{}, 1)}, left: make(chan struct{})}
	env := stream.New(stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(1))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), snk, "blocked")
	j, err := env.Build("cancel-while-deploying")
	if err != nil {
		t.Fatal(err)
	}
	placeOnLoopback(t, j, allRemote)
	h := j.Start(context.Background())
	defer h.Cancel()
	select {
	case <-snk.entered:
	case <-time.After(time.Minute):
		t.Fatal("the writer was never created")
	}
	h.Cancel()
	if _, err := h.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("job: %v, want it cancelled", err)
	}
	select {
	case <-snk.left:
	case <-time.After(time.Minute):
		t.Fatal("the build blocked on the task host was not cancelled when its session ended")
	}
}
