package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// splitState is a split's mutable progress, owned by the task goroutine.
type splitState struct {
	Split
	m *partMetrics
}

// partMetrics are one partition's gauges: written by the task goroutine
// (current), the fetcher (high watermark) and the offset committer
// (committed); read at export time from any goroutine.
type partMetrics struct {
	current, committed, highWatermark atomic.Int64
}

// partMetricsSet holds the gauges of every partition a reader has had.
type partMetricsSet struct {
	group metrics.Group
	mu    sync.Mutex
	parts map[string]*partMetrics
}

// get returns the partition's gauges, registering them on first use:
// currentOffset, committedOffset (-1 before the first commit) and
// pendingRecords (high watermark minus current offset; -1 while unknown).
func (ms *partMetricsSet) get(id string) *partMetrics {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m, ok := ms.parts[id]; ok {
		return m
	}
	m := &partMetrics{}
	m.committed.Store(-1)
	m.highWatermark.Store(-1)
	ms.parts[id] = m
	g := ms.group.With("partition", id)
	g.Gauge("currentOffset", m.current.Load)
	g.Gauge("committedOffset", m.committed.Load)
	g.Gauge("pendingRecords", func() int64 {
		hw := m.highWatermark.Load()
		if hw < 0 {
			return -1
		}
		return max(0, hw-m.current.Load())
	})
	return m
}

// reader is readerbase.Reader plus offset commits once every sink of the
// job committed a checkpoint (source.CommitListener).
type reader[T any] struct {
	*readerbase.Reader[*kgo.Record, T, Split, *splitState]
	cfg *sourceConfig
	log *slog.Logger

	offsets  map[int64][]Split // by checkpoint, until it (or a later one) is committed
	finished []Split           // finished since the last snapshot, to commit once
	pm       *partMetricsSet
	reach    *reach // watches the fetcher's brokers

	commitMu   sync.Mutex
	commitWG   sync.WaitGroup
	committing bool
	toCommit   map[string]Split // merged positions waiting for the commit loop
	commitCl   *kgo.Client
	committed  map[string]int64 // split id → last committed offset, for the gauge
	closed     bool
}

func newReader[T any](rctx source.ReaderContext, cfg *sourceConfig, deser Deserializer[T]) (*reader[T], error) {
	m := rctx.Metrics()
	errs := m.Counter(metrics.NumRecordsInErrors)
	bytesIn := m.Counter("numBytesIn")
	log := cfg.logger.With("subtask", rctx.SubtaskIndex())
	pm := &partMetricsSet{group: m, parts: map[string]*partMetrics{}}
	r := &reader[T]{cfg: cfg, log: log, offsets: map[int64][]Split{}, committed: map[string]int64{}, pm: pm,
		reach: newReach(log, "kafka source", cfg.brokers, cfg.connTimeout)}
	em := &emitter[T]{deser: deser, cfg: cfg, log: log, errs: errs, bytesIn: bytesIn}
	base, err := readerbase.New(rctx, readerbase.Config[*kgo.Record, T, Split, *splitState]{
		NewSplitReader: func() (readerbase.SplitReader[*kgo.Record, Split], error) { return newSplitReader(cfg, pm, r.reach) },
		Emitter:        em,
		InitState: func(s Split) *splitState {
			st := &splitState{Split: s, m: pm.get(s.SplitID())}
			st.m.current.Store(s.Offset)
			return st
		},
		ToSplit: func(s *splitState) Split { return s.Split },
		OnSplitFinished: func(done []*splitState) error {
			if cfg.group != "" {
				for _, st := range done {
					r.finished = append(r.finished, st.Split)
				}
			}
			return nil
		},
	}, readerbase.SingleFetcher())
	if err != nil {
		r.reach.close()
		return nil, err
	}
	r.Reader = base
	return r, nil
}

// emitter turns fetched records into values on the task goroutine. It is
// a readerbase.BatchEmitter: a partition's records of one fetch come in
// one call, and the split's position, its currentOffset gauge and
// numBytesIn move once per call.
type emitter[T any] struct {
	deser         Deserializer[T]
	cfg           *sourceConfig
	log           *slog.Logger
	errs, bytesIn *metrics.Counter
	// skipped counts skipped records not yet logged; lastLog is when the
	// last warning was logged (both owned by the task goroutine).
	skipped int64
	lastLog time.Time
}

// Emit emits one record and moves the split past it.
func (e *emitter[T]) Emit(rec *kgo.Record, out source.Output[T], st *splitState) error {
	st.Offset = rec.Offset + 1
	st.m.current.Store(st.Offset)
	if rec.Attrs.IsControl() {
		return nil
	}
	e.bytesIn.Add(int64(len(rec.Key) + len(rec.Value)))
	return e.one(rec, out)
}

// EmitBatch emits a partition's records of one fetch and moves the split
// past the last one. A record is not read after it was emitted: a sink
// that owns the records it is given (RecordSerializer) may produce, and
// so change, it as soon as it is collected.
func (e *emitter[T]) EmitBatch(recs []*kgo.Record, out source.Output[T], st *splitState) error {
	next := recs[len(recs)-1].Offset + 1
	var n int64
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			continue
		}
		n += int64(len(rec.Key) + len(rec.Value))
		if err := e.one(rec, out); err != nil {
			st.Offset = rec.Offset + 1
			st.m.current.Store(st.Offset)
			e.bytesIn.Add(n)
			return err
		}
	}
	st.Offset = next
	st.m.current.Store(next)
	e.bytesIn.Add(n)
	return nil
}

// one deserializes rec and emits the value with the record's timestamp,
// or handles a malformed record by the source's ErrorPolicy.
func (e *emitter[T]) one(rec *kgo.Record, out source.Output[T]) error {
	v, err := e.deser.Deserialize(rec)
	if err == nil {
		out.CollectAt(v, rec.Timestamp.UnixMilli())
		return nil
	}
	err = fmt.Errorf("%w: topic %q partition %d offset %d: %w", ErrMalformedRecord, rec.Topic, rec.Partition, rec.Offset, err)
	if e.cfg.policy != SkipOnError {
		return err
	}
	// Counted always; logged at once for the first, then at most once
	// per malformedLogEvery with the number skipped since the last
	// warning.
	e.errs.Inc()
	e.skipped++
	if now := time.Now(); e.lastLog.IsZero() || now.Sub(e.lastLog) >= e.cfg.malformedLogEvery {
		e.log.Warn("kafka source: skipped a malformed record (on-malformed: skip)", "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "error", err, "skipped_since_last_warning", e.skipped)
		e.skipped, e.lastLog = 0, now
	}
	return nil
}

// SnapshotState remembers the positions to commit once the checkpoint's
// output is committed by every sink.
func (r *reader[T]) SnapshotState(checkpointID int64) ([]Split, error) {
	ss, err := r.Reader.SnapshotState(checkpointID)
	if err != nil {
		return nil, err
	}
	if r.cfg.group != "" {
		r.offsets[checkpointID] = append(append([]Split(nil), ss...), r.finished...)
		r.finished = nil
	}
	return ss, nil
}

// NotifyCheckpointCommitted commits the checkpoint's positions to the
// consumer group in the background, once every sink of the job committed
// the checkpoint's output (not when it merely completed: a crash between
// the two would let a re-run from the group's offsets skip output that was
// never committed). The positions of earlier checkpoints whose notice was
// skipped are merged in (newer wins) and dropped with it. One commit runs
// at a time; positions that arrive meanwhile are merged (newest wins) and
// committed next, so the last committed checkpoint's positions are always
// committed to the group eventually.
func (r *reader[T]) NotifyCheckpointCommitted(checkpointID int64) error {
	var ids []int64
	for id := range r.offsets {
		if id <= checkpointID {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	merged := map[string]Split{}
	for _, id := range ids {
		for _, s := range r.offsets[id] {
			merged[s.SplitID()] = s
		}
		delete(r.offsets, id)
	}
	if len(merged) == 0 {
		return nil
	}
	r.commitMu.Lock()
	defer r.commitMu.Unlock()
	if r.closed {
		return nil
	}
	if r.toCommit == nil {
		r.toCommit = map[string]Split{}
	}
	for id, s := range merged {
		r.toCommit[id] = s
	}
	if r.committing {
		return nil
	}
	if r.commitCl == nil {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(r.cfg.brokers...)}, r.cfg.clientOpts...)...)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		r.commitCl = cl
	}
	r.committing = true
	r.commitWG.Add(1)
	go r.commitLoop(r.commitCl, checkpointID)
	return nil
}

// commitLoop commits merged positions until none are left (each commit
// bounded by 30s; a failed one is logged and not retried until the next
// committed checkpoint).
func (r *reader[T]) commitLoop(cl *kgo.Client, checkpointID int64) {
	defer r.commitWG.Done()
	for {
		r.commitMu.Lock()
		batch := r.toCommit
		r.toCommit = nil
		if len(batch) == 0 {
			r.committing = false
			r.commitMu.Unlock()
			return
		}
		r.commitMu.Unlock()
		os := kadm.Offsets{}
		for _, s := range batch {
			os.AddOffset(s.Topic, s.Partition, s.Offset, -1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := kadm.NewClient(cl).CommitOffsets(ctx, r.cfg.group, os)
		cancel()
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			r.log.Warn("kafka source: committing offsets to the group failed; retried with the next committed checkpoint (a fresh start from the group's offsets would read the records since its last commit again)",
				"group", r.cfg.group, "checkpoint", checkpointID, "err", err)
			continue
		}
		r.commitMu.Lock()
		for id, s := range batch {
			r.committed[id] = s.Offset
			r.pm.get(id).committed.Store(s.Offset)
		}
		r.commitMu.Unlock()
	}
}

// Close stops the fetcher and waits for an offset commit in flight.
func (r *reader[T]) Close() error {
	err := r.Reader.Close()
	r.reach.close()
	r.commitMu.Lock()
	r.closed = true
	r.commitMu.Unlock()
	r.commitWG.Wait()
	if r.commitCl != nil {
		r.commitCl.Close()
	}
	return err
}

// partReader is the fetcher side: one franz-go client consuming the
// assigned partitions directly (no group).
//
// A partition whose split reached its stop offset is paused, not removed:
// removing a partition from a franz-go consumer restarts its fetch session,
// which discards every other partition's buffered (fetched, not yet
// polled) records and fetches them again — about twice the data when
// bounded partitions finish one after another.
type partReader struct {
	cfg    *sourceConfig
	pm     *partMetricsSet
	reach  *reach
	cl     *kgo.Client
	stops  map[string]int64          // split id → stop offset (NoStop: none)
	done   []string                  // splits finished before any fetch
	paused map[string]map[int32]bool // finished partitions, paused
}

func newSplitReader(cfg *sourceConfig, pm *partMetricsSet, r *reach) (*partReader, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.brokers...),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(cfg.fetchMaxWait),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{}),
	}
	if cfg.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	opts = append(append(opts, cfg.clientOpts...), r.opt())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: source client: %w", ErrInvalidConfig, err)
	}
	return &partReader{cfg: cfg, pm: pm, reach: r, cl: cl, stops: map[string]int64{}, paused: map[string]map[int32]bool{}}, nil
}

func (p *partReader) AddSplits(splits []Split) error {
	add := map[string]map[int32]kgo.Offset{}
	// A partition finished (paused) earlier and assigned again starts
	// afresh: remove and resume it before adding it at its new offset.
	again := map[string][]int32{}
	for _, s := range splits {
		if p.paused[s.Topic][s.Partition] {
			again[s.Topic] = append(again[s.Topic], s.Partition)
			delete(p.paused[s.Topic], s.Partition)
		}
	}
	if len(again) > 0 {
		p.cl.RemoveConsumePartitions(again)
		p.cl.ResumeFetchPartitions(again)
	}
	for _, s := range splits {
		if s.StopOffset != NoStop && s.Offset >= s.StopOffset {
			p.done = append(p.done, s.SplitID())
			continue
		}
		p.stops[s.SplitID()] = s.StopOffset
		if add[s.Topic] == nil {
			add[s.Topic] = map[int32]kgo.Offset{}
		}
		add[s.Topic][s.Partition] = kgo.NewOffset().At(s.Offset)
	}
	if len(add) > 0 {
		p.cl.AddConsumePartitions(add)
	}
	return nil
}

func (p *partReader) Fetch(ctx context.Context) (readerbase.Batch[*kgo.Record], error) {
	var b readerbase.Batch[*kgo.Record]
	if len(p.done) > 0 {
		b.Finished, p.done = p.done, nil
		return b, nil
	}
	pctx, stop := p.reach.bound(ctx)
	fs := p.cl.PollRecords(pctx, p.cfg.maxPollRecords)
	stop()
	if err := p.reach.err(); err != nil {
		return b, err
	}
	remove := map[string][]int32{} // deleted partitions
	pause := map[string][]int32{}  // finished partitions
	for _, fe := range fs.Errors() {
		if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, context.DeadlineExceeded) || ctx.Err() != nil {
			continue
		}
		if fe.Topic != "" && (errors.Is(fe.Err, kerr.UnknownTopicOrPartition) || errors.Is(fe.Err, kerr.UnknownTopicID)) {
			// The topic or partition was deleted: drop its splits
			// rather than fail the job.
			for id := range p.stops {
				if id == splitID(fe.Topic, fe.Partition) || (fe.Partition < 0 && strings.HasPrefix(id, fe.Topic+"-")) {
					p.cfg.logger.Warn("kafka source: partition no longer exists; dropping it", "split", id, "err", fe.Err)
					b.Finished = append(b.Finished, id)
					delete(p.stops, id)
				}
			}
			remove[fe.Topic] = append(remove[fe.Topic], fe.Partition)
			continue
		}
		if fe.Topic == "" {
			return b, fmt.Errorf("kafka source: fetch from brokers %v: %w", p.cfg.brokers, authzError(fe.Err, p.cl, p.cfg.brokers, opRead, resourceNames{}))
		}
		return b, fmt.Errorf("kafka source: fetch topic %q partition %d: %w", fe.Topic, fe.Partition,
			authzError(fe.Err, p.cl, p.cfg.brokers, opRead, resourceNames{topic: fe.Topic}))
	}
	fs.EachPartition(func(fp kgo.FetchTopicPartition) {
		id := splitID(fp.Topic, fp.Partition)
		if hw := fp.HighWatermark; hw >= 0 && fp.Err == nil {
			if p.cfg.readCommitted && fp.LastStableOffset >= 0 {
				hw = fp.LastStableOffset
			}
			p.pm.get(id).highWatermark.Store(hw)
		}
		if len(fp.Records) == 0 {
			return
		}
		stop, known := p.stops[id]
		if !known {
			return // finished earlier; records fetched before removal
		}
		recs := fp.Records
		finished := false
		if stop != NoStop {
			n := 0
			for n < len(recs) && recs[n].Offset < stop {
				n++
			}
			finished = n < len(recs) || (n > 0 && recs[n-1].Offset+1 >= stop)
			recs = recs[:n]
		}
		if len(recs) > 0 {
			b.Records = append(b.Records, readerbase.SplitRecords[*kgo.Record]{SplitID: id, Records: recs})
		}
		if finished {
			b.Finished = append(b.Finished, id)
			delete(p.stops, id)
			pause[fp.Topic] = append(pause[fp.Topic], fp.Partition)
			if p.paused[fp.Topic] == nil {
				p.paused[fp.Topic] = map[int32]bool{}
			}
			p.paused[fp.Topic][fp.Partition] = true
		}
	})
	if len(pause) > 0 {
		p.cl.PauseFetchPartitions(pause)
	}
	if len(remove) > 0 {
		p.cl.RemoveConsumePartitions(remove)
	}
	return b, nil
}

func (p *partReader) Close() error {
	p.cl.Close()
	return nil
}
