package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestPartitionTime checks the extraction of a partition's time and the
// partition-time and process-time triggers.
func TestPartitionTime(t *testing.T) {
	utc := &PartitionCommitStrategy{TimeZone: time.UTC}
	pat := &PartitionCommitStrategy{TimeZone: time.UTC, TimestampPattern: "$dt $hr:00:00"}
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	local := &PartitionCommitStrategy{TimeZone: paris, TimestampPattern: "$dt $hr:00:00"}
	for _, c := range []struct {
		s      *PartitionCommitStrategy
		bucket string
		want   time.Time
	}{
		{utc, "dt=2026-12-01", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{utc, "dt=2026-12-01 07%3A30%3A00/x=1", time.Date(2026, 12, 1, 7, 30, 0, 0, time.UTC)},
		{pat, "dt=2026-12-01/hr=13", time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)},
		{pat, "hr=13/dt=2026-12-01", time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)},
		{local, "dt=2026-12-01/hr=13", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)},
	} {
		got, err := c.s.partitionTime(c.bucket)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("%s with %q: %v, %v; want %v", c.bucket, c.s.TimestampPattern, got, err, c.want)
		}
	}
	for _, c := range []struct {
		s      *PartitionCommitStrategy
		bucket string
		want   string
	}{
		{utc, "", "the base directory is no partition"},
		{utc, "2026-12-01", "is not Hive-style"},
		{utc, "country=FR", `time "FR"`},
		{pat, "dt=2026-12-01", `time "2026-12-01 $hr:00:00"`},
	} {
		if _, err := c.s.partitionTime(c.bucket); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.bucket, err, c.want)
		}
	}

	hour := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)
	pt := &PartitionCommitStrategy{Trigger: PartitionTimeTrigger, Delay: time.Hour, TimeZone: time.UTC, TimestampPattern: "$dt $hr:00:00"}
	for _, c := range []struct {
		wm   int64
		want bool
	}{
		{math.MinInt64, false},
		{hour.Add(time.Hour).UnixMilli() - 1, false},
		{hour.Add(time.Hour).UnixMilli(), true},
		{math.MaxInt64, true},
	} {
		if got, err := pt.due("dt=2026-12-01/hr=13", time.Time{}, time.Time{}, c.wm); err != nil || got != c.want {
			t.Errorf("partition-time at watermark %d: %v, %v; want %v", c.wm, got, err, c.want)
		}
	}
	proc := &PartitionCommitStrategy{Trigger: ProcessTimeTrigger, Delay: time.Minute, TimeZone: time.UTC}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want bool
	}{
		{created, false},
		{created.Add(time.Minute - time.Millisecond), false},
		{created.Add(time.Minute), true},
	} {
		// process-time ignores the partition's values and the watermark
		if got, err := proc.due("country=FR", created, c.now, math.MinInt64); err != nil || got != c.want {
			t.Errorf("process-time at %v: %v, %v; want %v", c.now, got, err, c.want)
		}
	}
}

// recordingPolicy records partition commits.
type recordingPolicy struct {
	mu    sync.Mutex
	calls []string
	check func(p Partition) error
}

func (r *recordingPolicy) CommitPartition(ctx context.Context, p Partition) error {
	if r.check != nil {
		if err := r.check(p); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, p.Path)
	return nil
}

func (r *recordingPolicy) committed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// TestPartitionCommitterUnit drives the global committer by hand: nothing
// is committed before every writer reported, while a writer holds a file
// of the partition, or before the watermark passed; pending partitions
// survive a new committer (a restore); markers of a bigger parallelism
// are dropped after a scale-down.
func TestPartitionCommitterUnit(t *testing.T) {
	dir := t.TempDir()
	rec := &recordingPolicy{}
	s, err := buildSink[string](dir, LinesFormat(), nil, []SinkOption{PartitionCommit(PartitionCommitStrategy{
		Trigger: PartitionTimeTrigger, Delay: time.Hour, TimestampPattern: "$dt $hr:00:00", Policies: []PartitionCommitter{SuccessFile(), rec}})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	newPC := func() *partitionCommitter {
		pc, err := s.newPartitionCommitter(ctx, testJob, nil)
		if err != nil {
			t.Fatal(err)
		}
		return pc
	}
	h := func(hr int) int64 { return time.Date(2026, 12, 1, hr, 0, 0, 0, time.UTC).UnixMilli() }
	p13, p14 := "dt=2026-12-01/hr=13", "dt=2026-12-01/hr=14"
	for _, b := range []string{p13, p14} {
		if err := os.MkdirAll(filepath.Join(dir, b), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	mark := func(cp int64, sub, par int, wm int64, busy ...string) committable {
		return committable{Marker: &partitionMarker{Checkpoint: cp, Subtask: sub, Parallelism: par, Watermark: wm, Busy: busy}}
	}
	file := func(b string) committable { return committable{Bucket: b, Temp: ".x", Final: "x"} }
	success := func(b string) bool {
		_, err := os.Stat(filepath.Join(dir, b, SuccessFileName))
		return err == nil
	}
	pc := newPC()
	step := func(cp int64, cms ...committable) {
		t.Helper()
		if err := pc.CommitGlobal(ctx, cp, cms); err != nil {
			t.Fatal(err)
		}
	}
	// Only subtask 0 of 2 reported: nothing, however high its watermark.
	step(1, file(p13), mark(1, 0, 2, math.MaxInt64))
	if len(rec.committed()) != 0 {
		t.Fatalf("committed %v before every writer reported", rec.committed())
	}
	// Both reported; the watermark (the minimum) is below 13:00 + 1h.
	step(2, file(p14), mark(2, 0, 2, h(16)), mark(2, 1, 2, h(14)-1))
	if len(rec.committed()) != 0 {
		t.Fatalf("committed %v before the watermark passed", rec.committed())
	}
	// A restore: a new committer finds both partitions pending.
	pc.Close()
	pc = newPC()
	if len(pc.pending) != 2 {
		t.Fatalf("pending after a restore: %v", pc.pending)
	}
	// The watermark passed 14:00, but subtask 1 holds a file of hr=13.
	step(3, mark(3, 0, 2, h(16)), mark(3, 1, 2, h(15)-1, p13))
	if len(rec.committed()) != 0 || success(p13) {
		t.Fatalf("committed %v while a writer held a file of it", rec.committed())
	}
	// An older marker handed over again changes nothing.
	step(3, mark(2, 1, 2, h(16)))
	if len(rec.committed()) != 0 {
		t.Fatalf("an older marker counted: %v", rec.committed())
	}
	step(4, file(p13), mark(4, 0, 2, h(16)), mark(4, 1, 2, h(15)-1))
	if got := rec.committed(); len(got) != 1 || got[0] != p13 || !success(p13) || success(p14) {
		t.Fatalf("committed %v; want only %s with its _SUCCESS", got, p13)
	}
	// Scale down to one writer: subtask 1's marker no longer counts.
	step(5, mark(5, 0, 1, h(16)))
	if got := rec.committed(); len(got) != 2 || got[1] != p14 || !success(p14) {
		t.Fatalf("committed %v; want %s too", got, p14)
	}
	// Late data in hr=13: pending again, committed again.
	step(6, file(p13), mark(6, 0, 1, h(16)))
	if got := rec.committed(); len(got) != 3 || got[2] != p13 {
		t.Fatalf("late data: committed %v", got)
	}
	if len(pc.pending) != 0 {
		t.Fatalf("pending %v", pc.pending)
	}
	pc.Close()
}

// TestPartitionCommitFailures writes records with event times over ten
// hourly partitions through two writers (both writers' splits sweep the
// same hours, so each partition gets files of both), with injected
// failures of readers, writers, committers and the global committer. A
// policy checks, when it is called, that the partition's visible files
// hold every record of the partition; at the end every partition has its
// _SUCCESS and the output holds every record exactly once.
func TestPartitionCommitFailures(t *testing.T) {
	const n, hours = 6000, 10
	half := int64(n / 2)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	step := int64(hours) * 3600_000 / half
	tsOf := func(k int64) int64 { return base.UnixMilli() + (k%half)*step }
	want := map[string]int{}
	for k := range int64(n) {
		want[time.UnixMilli(tsOf(k)).UTC().Format("dt=2006-01-02/hr=15")]++
	}
	out := t.TempDir()
	var failMu sync.Mutex
	failOn := map[string]bool{"hr=03": true, "hr=07": true}
	check := &recordingPolicy{check: func(p Partition) error {
		got := 0
		for _, f := range finishedFiles(t, p.Location) {
			got += countLines(t, filepath.Join(p.Location, f))
		}
		if got != want[p.Path] {
			return fmt.Errorf("partition %s committed with %d visible records, want %d", p.Path, got, want[p.Path])
		}
		return nil
	}}
	buckets := BucketFunc[string](func(_ string, c BucketContext) (string, error) {
		return time.UnixMilli(c.Timestamp).UTC().Format("dt=2006-01-02/hr=15"), nil
	})
	plan := faultinject.RandomPlan(18, 6, append(faultinject.Kinds(), faultinject.AfterPrepareCommit), 2, n/2, 20)
	sk, err := NewRowSink(out, LinesFormat(), WithBuckets(buckets),
		PartitionCommit(PartitionCommitStrategy{Trigger: PartitionTimeTrigger, Delay: time.Hour, TimestampPattern: "$dt $hr:00:00",
			Policies: []PartitionCommitter{SuccessFile(), check}}),
		sinkOptionFunc(func(c *sinkConfig) {
			c.partCommitHook = func(bucket string) error {
				failMu.Lock()
				defer failMu.Unlock()
				if hr := bucket[strings.LastIndexByte(bucket, '/')+1:]; failOn[hr] {
					delete(failOn, hr)
					return errors.New("injected global committer failure")
				}
				return nil
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Restart(restart.FixedDelay(20, 0)), stream.Logger(stream.DiscardLogger()))
	gen := datagen.New(func(k int64) string { return strconv.FormatInt(k, 10) }, datagen.Count(n), datagen.Splits(2),
		datagen.Timestamps(tsOf), datagen.RatePerSecond(4000))
	src := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.BoundedOutOfOrderness[string](0), "gen")
	stream.SinkTo(src, faultinject.WrapSink(sk, plan), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "partition-commit")
	if err != nil {
		t.Fatalf("job: %v (plan %v)", err, plan)
	}
	t.Logf("restarts %d, fired %v, policy calls %d", res.Restarts, plan.Fired(), len(check.committed()))
	if len(failOn) != 0 {
		t.Errorf("global committer failures %v did not fire", failOn)
	}
	if len(check.committed()) < hours {
		t.Errorf("policy calls %v, want every one of %d partitions", check.committed(), hours)
	}
	seen := map[string]int{}
	for _, f := range finishedFiles(t, out) {
		if filepath.Base(f) == SuccessFileName {
			seen[filepath.Dir(f)]++
			continue
		}
	}
	if len(seen) != len(want) {
		t.Errorf("_SUCCESS in %d partitions, want %d: %v", len(seen), len(want), seen)
	}
	for p := range want {
		if seen[filepath.FromSlash(p)] != 1 {
			t.Errorf("partition %s: %d _SUCCESS files", p, seen[filepath.FromSlash(p)])
		}
	}
	var wantLines []string
	for k := range n {
		wantLines = append(wantLines, strconv.Itoa(k))
	}
	got := readOutput(t, out)
	for f := range got {
		if filepath.Base(f) == SuccessFileName {
			delete(got, f)
		}
	}
	checkExactlyOnce(t, wantLines, got, false)
}

func countLines(t *testing.T, name string) int {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
	}
	return n
}

// readerStore is a dirStore that reads objects back (ObjectReader).
type readerStore struct{ *dirStore }

func (r readerStore) ReadObject(_ context.Context, key string) ([]byte, bool, error) {
	b, err := os.ReadFile(filepath.Join(r.root, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

// TestPartitionCommitObjectStore commits partitions of a sink on an object
// store under failures: every partition gets its _SUCCESS object, the
// output is exact, and no upload is left. A store without ObjectReader is
// refused when the global committer starts.
func TestPartitionCommitObjectStore(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 10, 600)
	parts := map[string]bool{}
	for _, l := range want {
		parts[fmt.Sprint("p=", len(l)%3)] = true
	}
	buckets := BucketFunc[string](func(l string, _ BucketContext) (string, error) { return fmt.Sprint("p=", len(l)%3), nil })
	store := readerStore{newDirStore("/")}
	plan := faultinject.RandomPlan(5, 4, faultinject.Kinds(), 2, int64(len(want))/4, 10)
	res, err := runCopy(t, in, out, jobOpts{plan: plan, restarts: 8, sinkOpts: []SinkOption{WithObjectStore(store), WithBuckets(buckets),
		PartitionCommit(PartitionCommitStrategy{Policies: []PartitionCommitter{SuccessFile()}})}})
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("fired %v, %d restarts", plan.Fired(), res.Restarts)
	for p := range parts {
		if _, err := os.Stat(filepath.Join(out, p, SuccessFileName)); err != nil {
			t.Errorf("partition %s: %v", p, err)
		}
	}
	checkExactlyOnce(t, want, readOutput(t, out), false)
	if ups, _ := store.Uploads(t.Context(), ""); len(ups) > 0 {
		t.Errorf("unfinished uploads left: %v", ups)
	}

	_, err = runCopy(t, in, t.TempDir(), jobOpts{sinkOpts: []SinkOption{WithObjectStore(newDirStore("/")), WithBuckets(buckets),
		PartitionCommit(PartitionCommitStrategy{Policies: []PartitionCommitter{SuccessFile()}})}})
	if err == nil || !strings.Contains(err.Error(), "ObjectReader") {
		t.Errorf("a store without ObjectReader: %v", err)
	}
}
