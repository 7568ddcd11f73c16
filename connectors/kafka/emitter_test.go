package kafka

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// ownerOutput collects values like a sink that owns the records it gets:
// it scribbles over each record as soon as it is collected (as franz-go
// does to a produced record), so an emitter that read a record after
// emitting it would see the damage.
type ownerOutput struct {
	recs []*kgo.Record
	vals [][]byte
	ts   []int64
}

func (o *ownerOutput) Collect(v *kgo.Record) { o.CollectAt(v, -1) }
func (o *ownerOutput) CollectAt(v *kgo.Record, ts int64) {
	o.recs = append(o.recs, v)
	o.vals = append(o.vals, v.Value)
	o.ts = append(o.ts, ts)
	v.Offset, v.Topic, v.Timestamp, v.Value, v.Key = -1, "scribbled", time.Time{}, nil, nil
}
func (o *ownerOutput) EmitWatermark(int64)                        {}
func (o *ownerOutput) MarkIdle()                                  {}
func (o *ownerOutput) ForSplit(string) source.Output[*kgo.Record] { return o }
func (o *ownerOutput) ReleaseSplit(string)                        {}

// recordDeser delivers the record itself; values "bad" are malformed.
type recordDeser struct{}

func (recordDeser) Deserialize(r *kgo.Record) (*kgo.Record, error) {
	if string(r.Value) == "bad" {
		return nil, errors.New("bad value")
	}
	return r, nil
}

func testEmitter(policy ErrorPolicy) (*emitter[*kgo.Record], *metrics.Registry) {
	reg := metrics.NewRegistry()
	cfg := defaultSourceConfig()
	cfg.policy = policy
	g := reg.Root()
	return &emitter[*kgo.Record]{deser: recordDeser{}, cfg: &cfg, log: quiet,
		errs: g.Counter(metrics.NumRecordsInErrors), bytesIn: g.Counter("numBytesIn")}, reg
}

func emitterRecords() []*kgo.Record {
	ts := time.UnixMilli(1_700_000_000_000)
	ctl := &kgo.Record{Topic: "t", Offset: 12, Attrs: kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Control: true, Transactional: true})}
	return []*kgo.Record{
		{Topic: "t", Offset: 10, Key: []byte("k"), Value: []byte("v10"), Timestamp: ts},
		{Topic: "t", Offset: 11, Value: []byte("bad"), Timestamp: ts},
		ctl,
		{Topic: "t", Offset: 13, Value: []byte("v13"), Timestamp: ts.Add(time.Second)},
	}
}

// TestEmitterBatchSkip: a partition's group moves the split past its last
// record (a control record included) once, emits values with their
// timestamps in order, skips the malformed one (SkipOnError), counts
// bytes, and reads no record after emitting it.
func TestEmitterBatchSkip(t *testing.T) {
	em, reg := testEmitter(SkipOnError)
	var _ readerbase.BatchEmitter[*kgo.Record, *kgo.Record, *splitState] = em
	st := &splitState{Split: Split{Topic: "t", Offset: 10}, m: &partMetrics{}}
	out := &ownerOutput{}
	if err := em.EmitBatch(emitterRecords(), out, st); err != nil {
		t.Fatal(err)
	}
	if st.Offset != 14 || st.m.current.Load() != 14 {
		t.Errorf("split at %d (gauge %d), want 14", st.Offset, st.m.current.Load())
	}
	if len(out.vals) != 2 || string(out.vals[0]) != "v10" || string(out.vals[1]) != "v13" {
		t.Errorf("emitted %q, want v10, v13", out.vals)
	}
	if out.ts[0] != 1_700_000_000_000 || out.ts[1] != 1_700_000_001_000 {
		t.Errorf("timestamps %v", out.ts)
	}
	if got := reg.Sum(metrics.NumRecordsInErrors); got != 1 {
		t.Errorf("numRecordsInErrors = %d, want 1", got)
	}
	if got := reg.Sum("numBytesIn"); got != 4+3+3 {
		t.Errorf("numBytesIn = %d, want 10", got)
	}
}

// TestEmitterBatchFail: with FailOnError the malformed record fails the
// group, naming its offset, and the split stays right after it.
func TestEmitterBatchFail(t *testing.T) {
	em, _ := testEmitter(FailOnError)
	st := &splitState{Split: Split{Topic: "t", Offset: 10}, m: &partMetrics{}}
	out := &ownerOutput{}
	err := em.EmitBatch(emitterRecords(), out, st)
	if !errors.Is(err, ErrMalformedRecord) || st.Offset != 12 {
		t.Fatalf("err %v, split at %d; want ErrMalformedRecord at 12", err, st.Offset)
	}
	if len(out.vals) != 1 {
		t.Errorf("emitted %d records before the malformed one, want 1", len(out.vals))
	}
}

// TestEmitterOne: the per-record path gives the same result.
func TestEmitterOne(t *testing.T) {
	em, reg := testEmitter(SkipOnError)
	st := &splitState{Split: Split{Topic: "t", Offset: 10}, m: &partMetrics{}}
	out := &ownerOutput{}
	for _, r := range emitterRecords() {
		if err := em.Emit(r, out, st); err != nil {
			t.Fatal(err)
		}
	}
	if st.Offset != 14 || len(out.vals) != 2 || reg.Sum("numBytesIn") != 10 {
		t.Errorf("split at %d, %d values, %d bytes", st.Offset, len(out.vals), reg.Sum("numBytesIn"))
	}
}
