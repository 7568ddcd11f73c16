package fakes

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// ReaderContext is a source.ReaderContext that counts split requests and
// keeps events sent to the enumerator. The zero value is subtask 0 of 1,
// attempt 0.
type ReaderContext struct {
	Subtask      int
	Parallel     int // 0 means 1
	AttemptNum   int
	ID           string         // JobID; "" means "0000000000000000"
	SplitRequest int            // number of SendSplitRequest calls
	Events       []source.Event // events sent to the enumerator
	Registry     *metrics.Registry
}

var _ source.ReaderContext = (*ReaderContext)(nil)

func (c *ReaderContext) SubtaskIndex() int { return c.Subtask }
func (c *ReaderContext) Parallelism() int  { return max(c.Parallel, 1) }
func (c *ReaderContext) Attempt() int      { return c.AttemptNum }
func (c *ReaderContext) SendSplitRequest() { c.SplitRequest++ }
func (c *ReaderContext) JobID() string     { return jobID(c.ID) }
func (c *ReaderContext) SendEventToEnumerator(e source.Event) {
	c.Events = append(c.Events, e)
}

// Metrics returns a group of Registry (created on first use) labelled with
// the subtask.
func (c *ReaderContext) Metrics() metrics.Group {
	if c.Registry == nil {
		c.Registry = metrics.NewRegistry()
	}
	return c.Registry.Root().With("subtask", strconv.Itoa(c.Subtask))
}

// EnumeratorContext is a source.EnumeratorContext that records assignments
// and signals. Readers must be registered with Register before splits are
// assigned to them, as with the runtime.
type EnumeratorContext[S source.Split] struct {
	Parallel int // 0 means 1
	Readers  map[int]source.ReaderInfo
	// Assigned holds every split assigned, per subtask, in order.
	Assigned map[int][]S
	// Assignments counts AssignSplits calls.
	Assignments int
	// NoMoreSplits counts SignalNoMoreSplits calls per subtask.
	NoMoreSplits map[int]int
	// Events holds events sent to readers, per subtask.
	Events map[int][]source.Event
	// Async holds the CallAsync calls; tests run them by hand.
	Async    []AsyncCall
	Registry *metrics.Registry
	// Failed holds the first error passed to FailJob.
	Failed error
}

// AsyncCall is one recorded CallAsync.
type AsyncCall struct {
	Fn            func(context.Context) (any, error)
	Handler       func(any, error)
	Delay, Period time.Duration
}

var _ source.EnumeratorContext[source.Split] = (*EnumeratorContext[source.Split])(nil)

// Register adds subtasks to RegisteredReaders.
func (c *EnumeratorContext[S]) Register(subtasks ...int) {
	if c.Readers == nil {
		c.Readers = map[int]source.ReaderInfo{}
	}
	for _, s := range subtasks {
		c.Readers[s] = source.ReaderInfo{Subtask: s, Location: "local"}
	}
}

// Unregister removes subtasks from RegisteredReaders (a failed reader).
func (c *EnumeratorContext[S]) Unregister(subtasks ...int) {
	for _, s := range subtasks {
		delete(c.Readers, s)
	}
}

func (c *EnumeratorContext[S]) Parallelism() int { return max(c.Parallel, 1) }

// FailJob records the first failure in Failed.
func (c *EnumeratorContext[S]) FailJob(err error) {
	if c.Failed == nil {
		c.Failed = err
	}
}
func (c *EnumeratorContext[S]) RegisteredReaders() map[int]source.ReaderInfo {
	return maps.Clone(c.Readers)
}

// AssignSplits records the assignment; it fails for unregistered subtasks.
func (c *EnumeratorContext[S]) AssignSplits(a map[int][]S) error {
	for _, sub := range slices.Sorted(maps.Keys(a)) {
		if _, ok := c.Readers[sub]; !ok {
			return &UnregisteredError{Subtask: sub}
		}
	}
	if c.Assigned == nil {
		c.Assigned = map[int][]S{}
	}
	for sub, ss := range a {
		c.Assigned[sub] = append(c.Assigned[sub], ss...)
	}
	c.Assignments++
	return nil
}

func (c *EnumeratorContext[S]) SignalNoMoreSplits(subtask int) {
	if c.NoMoreSplits == nil {
		c.NoMoreSplits = map[int]int{}
	}
	c.NoMoreSplits[subtask]++
}

func (c *EnumeratorContext[S]) SendEventToReader(subtask int, e source.Event) {
	if c.Events == nil {
		c.Events = map[int][]source.Event{}
	}
	c.Events[subtask] = append(c.Events[subtask], e)
}

func (c *EnumeratorContext[S]) CallAsync(fn func(context.Context) (any, error), handler func(any, error), delay, period time.Duration) {
	c.Async = append(c.Async, AsyncCall{fn, handler, delay, period})
}

// Metrics returns the root group of Registry (created on first use).
func (c *EnumeratorContext[S]) Metrics() metrics.Group {
	if c.Registry == nil {
		c.Registry = metrics.NewRegistry()
	}
	return c.Registry.Root()
}

// AllAssigned returns every assigned split, sorted by subtask then order.
func (c *EnumeratorContext[S]) AllAssigned() []S {
	var out []S
	for _, sub := range slices.Sorted(maps.Keys(c.Assigned)) {
		out = append(out, c.Assigned[sub]...)
	}
	return out
}

// UnregisteredError is returned by EnumeratorContext.AssignSplits for a
// subtask that is not registered.
type UnregisteredError struct{ Subtask int }

func (e *UnregisteredError) Error() string {
	return "fakes: assign to unregistered subtask " + strconv.Itoa(e.Subtask)
}

// Record is one collected record.
type Record[T any] struct {
	Value        T
	Timestamp    int64
	HasTimestamp bool
	Split        string // "" when collected on the reader's main output
}

// Output is a source.Output that keeps everything. Per-split outputs made by
// ForSplit append to the same Records, tagged with the split id. The zero
// value is ready to use.
type Output[T any] struct {
	Records    []Record[T]
	Watermarks []int64
	Idle       int      // MarkIdle calls on any output
	ForSplits  int      // ForSplit calls
	Released   []string // ReleaseSplit calls, in order
	root       *Output[T]
	split      string
}

var _ source.Output[int] = (*Output[int])(nil)

func (o *Output[T]) top() *Output[T] {
	if o.root != nil {
		return o.root
	}
	return o
}

func (o *Output[T]) Collect(v T) {
	r := o.top()
	r.Records = append(r.Records, Record[T]{Value: v, Split: o.split})
}

func (o *Output[T]) CollectAt(v T, ts int64) {
	r := o.top()
	r.Records = append(r.Records, Record[T]{Value: v, Timestamp: ts, HasTimestamp: true, Split: o.split})
}

func (o *Output[T]) EmitWatermark(ts int64) {
	r := o.top()
	r.Watermarks = append(r.Watermarks, ts)
}

func (o *Output[T]) MarkIdle() { o.top().Idle++ }

func (o *Output[T]) ForSplit(id string) source.Output[T] {
	r := o.top()
	r.ForSplits++
	return &Output[T]{root: r, split: id}
}

func (o *Output[T]) ReleaseSplit(id string) {
	r := o.top()
	r.Released = append(r.Released, id)
}

// Values returns the collected values in order.
func (o *Output[T]) Values() []T {
	out := make([]T, len(o.Records))
	for i, r := range o.Records {
		out[i] = r.Value
	}
	return out
}

// Reset forgets everything collected.
func (o *Output[T]) Reset() { *o = Output[T]{} }

// Discard is a source.Output that drops everything, for benchmarks. Use a
// pointer; ForSplit returns the same Discard.
type Discard[T any] struct{ N int64 }

func (d *Discard[T]) Collect(T)                        { d.N++ }
func (d *Discard[T]) CollectAt(T, int64)               { d.N++ }
func (d *Discard[T]) EmitWatermark(int64)              {}
func (d *Discard[T]) MarkIdle()                        {}
func (d *Discard[T]) ForSplit(string) source.Output[T] { return d }
func (d *Discard[T]) ReleaseSplit(string)              {}

// InitContext is a sink.InitContext. The zero value is subtask 0 of 1,
// attempt 0, job "job", operator "sink", not restored.
type InitContext struct {
	Subtask     int
	Parallel    int // 0 means 1
	AttemptNum  int
	Job         string // "" means "job"
	ID          string // JobID; "" means "0000000000000000"
	Operator    string // "" means "sink"
	Restored    int64
	HasRestored bool
	Registry    *metrics.Registry
	Interval    time.Duration // CheckpointInterval
}

var _ sink.InitContext = (*InitContext)(nil)

func (c *InitContext) SubtaskIndex() int { return c.Subtask }
func (c *InitContext) Parallelism() int  { return max(c.Parallel, 1) }
func (c *InitContext) Attempt() int      { return c.AttemptNum }
func (c *InitContext) JobName() string {
	if c.Job == "" {
		return "job"
	}
	return c.Job
}
func (c *InitContext) JobID() string { return jobID(c.ID) }

func jobID(id string) string {
	if id == "" {
		return "0000000000000000"
	}
	return id
}

func (c *InitContext) OperatorName() string {
	if c.Operator == "" {
		return "sink"
	}
	return c.Operator
}
func (c *InitContext) OperatorUID() string                 { return c.OperatorName() }
func (c *InitContext) RestoredCheckpointID() (int64, bool) { return c.Restored, c.HasRestored }
func (c *InitContext) CheckpointInterval() time.Duration   { return c.Interval }

// Metrics returns a group of Registry (created on first use) labelled with
// the subtask.
func (c *InitContext) Metrics() metrics.Group {
	if c.Registry == nil {
		c.Registry = metrics.NewRegistry()
	}
	return c.Registry.Root().With("subtask", strconv.Itoa(c.Subtask))
}
