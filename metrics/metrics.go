package metrics

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Standard metric names, as Flink spells them.
const (
	NumRecordsIn            = "numRecordsIn"
	NumRecordsOut           = "numRecordsOut"
	NumBytesIn              = "numBytesIn"
	NumBytesOut             = "numBytesOut"
	NumRecordsInErrors      = "numRecordsInErrors"
	NumRecordsSend          = "numRecordsSend"
	NumRecordsSendErrors    = "numRecordsSendErrors"
	PendingRecords          = "pendingRecords"
	CurrentEmitEventTimeLag = "currentEmitEventTimeLag"
	CurrentOutputWatermark  = "currentOutputWatermark"
	CurrentInputWatermark   = "currentInputWatermark"
	// WatermarkAlignmentDrift is a source subtask's watermark minus the
	// minimum of its alignment group (FLIP-182).
	WatermarkAlignmentDrift = "watermarkAlignmentDrift"

	NumberOfCompletedCheckpoints = "numberOfCompletedCheckpoints"
	NumberOfFailedCheckpoints    = "numberOfFailedCheckpoints"
	LastCheckpointDuration       = "lastCheckpointDuration"
	LastCheckpointSize           = "lastCheckpointSize"
	NumRestarts                  = "numRestarts"
	NumCommittablesSuccess       = "numCommittablesSuccess"
	NumCommittablesFailure       = "numCommittablesFailure"
	NumCommittablesRetry         = "numCommittablesRetry"
)

// Group hands out metrics that share a set of labels. Implementations are
// safe for concurrent use.
type Group interface {
	// Counter returns the counter with this name in the group, creating it
	// on first use. Calling it twice with one name returns the same counter.
	Counter(name string) *Counter
	// Gauge registers fn as the gauge with this name in the group,
	// replacing an earlier one. fn is called at export time from any
	// goroutine and must be safe for that.
	Gauge(name string, fn func() int64)
	// With returns a child group with one more label.
	With(key, value string) Group
}

// Counter is a monotonically increasing count. The zero value is ready.
type Counter struct{ v atomic.Int64 }

// Inc adds one.
func (c *Counter) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Counter) Add(n int64) { c.v.Add(n) }

// Value returns the current count.
func (c *Counter) Value() int64 { return c.v.Load() }

// Label is one key=value pair of a metric's scope.
type Label struct{ Key, Value string }

// Sample is one metric's value at snapshot time.
type Sample struct {
	Name   string
	Labels []Label // in the order they were added with With
	Value  int64
	Gauge  bool // false for counters
}

// Label returns the value of the label with this key, or "".
func (s Sample) Label(key string) string {
	for _, l := range s.Labels {
		if l.Key == key {
			return l.Value
		}
	}
	return ""
}

// Registry is an in-memory Group root. The zero value is not usable; call
// NewRegistry.
type Registry struct {
	mu      sync.Mutex
	entries map[string]*entry
}

type entry struct {
	name    string
	labels  []Label
	counter *Counter
	gauge   func() int64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{entries: map[string]*entry{}} }

// Root returns the group with no labels.
func (r *Registry) Root() Group { return &group{r: r} }

// Snapshot returns every metric's current value, sorted by name and labels.
func (r *Registry) Snapshot() []Sample {
	r.mu.Lock()
	es := slices.Collect(maps.Values(r.entries))
	r.mu.Unlock()
	out := make([]Sample, 0, len(es))
	for _, e := range es {
		s := Sample{Name: e.name, Labels: e.labels}
		if e.gauge != nil {
			s.Value, s.Gauge = e.gauge(), true
		} else {
			s.Value = e.counter.Value()
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		return sampleKey(out[i].Name, out[i].Labels) < sampleKey(out[j].Name, out[j].Labels)
	})
	return out
}

// Sum adds up every sample with this name whose labels include all of match
// (given as key, value, key, value …).
func (r *Registry) Sum(name string, match ...string) int64 {
	var total int64
	for _, s := range r.Snapshot() {
		if s.Name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(match); i += 2 {
			if s.Label(match[i]) != match[i+1] {
				ok = false
				break
			}
		}
		if ok {
			total += s.Value
		}
	}
	return total
}

func sampleKey(name string, labels []Label) string {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range labels {
		b.WriteByte(0)
		b.WriteString(l.Key)
		b.WriteByte('=')
		b.WriteString(l.Value)
	}
	return b.String()
}

type group struct {
	r      *Registry
	labels []Label
}

func (g *group) Counter(name string) *Counter {
	k := sampleKey(name, g.labels)
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	if e, ok := g.r.entries[k]; ok && e.counter != nil {
		return e.counter
	}
	c := &Counter{}
	g.r.entries[k] = &entry{name: name, labels: g.labels, counter: c}
	return c
}

func (g *group) Gauge(name string, fn func() int64) {
	k := sampleKey(name, g.labels)
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	g.r.entries[k] = &entry{name: name, labels: g.labels, gauge: fn}
}

func (g *group) With(key, value string) Group {
	labels := make([]Label, len(g.labels), len(g.labels)+1)
	copy(labels, g.labels)
	return &group{r: g.r, labels: append(labels, Label{key, value})}
}

// Discard is a Group that keeps nothing; its counters work but are never
// exported.
func Discard() Group { return NewRegistry().Root() }
