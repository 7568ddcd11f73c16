package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"time"

	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/sink/leftover"
)

// maxCounterProbe bounds the search for a free part file name.
const maxCounterProbe = 1 << 20

// writer is one subtask's file sink writer, on the local file system or an
// ObjectStore (its partDest). It is used from the subtask's goroutine only.
type writer[T any] struct {
	s        *fileSink[T]
	dest     partDest
	names    partNames
	sub, par int
	attempt  int // sink.InitContext.Attempt
	// tag names the part files this writer resumes (see resumedName):
	// random, so that no two writer instances share one.
	tag       string
	next      int64
	buckets   map[string]*bucket[T]
	last      *bucket[T]    // the bucket of the last record, or nil
	pending   []committable // rolled since the last PrepareCommit
	held      []committable // compaction candidates held back (CheckpointsBeforeCompaction)
	heldSince int64         // the checkpoint since which files are held
	// restoredID is the checkpoint the writer was restored from (0: none).
	restoredID int64
	ending     bool // Flush(true) was called: release everything held
	buf        []byte
	closed     bool
	// wm is the writer's watermark (math.MinInt64 before the first),
	// reported for partition commit.
	wm int64
	// The processing-time clock is read every clockEvery records (and at
	// every checkpoint), not for every record: time.Now costs as much as
	// writing a short line.
	now      time.Time
	sinceNow int
	// basePath: the bucket assigner is BasePathBuckets, so every record's
	// bucket is "" and Write does not call it.
	basePath bool
	// defRoll: the rolling policy is a DefaultRollingPolicy (rolling), whose
	// size rule Write applies without building a PartFileInfo per record.
	defRoll bool
	rolling DefaultRollingPolicy
}

// clockEvery is how many records share one reading of the clock.
const clockEvery = 64

// clock returns the cached processing time, refreshing it every
// clockEvery calls.
func (w *writer[T]) clock() time.Time {
	if w.sinceNow == 0 {
		w.now = w.s.cfg.now()
	}
	w.sinceNow++
	if w.sinceNow == clockEvery {
		w.sinceNow = 0
	}
	return w.now
}

type bucket[T any] struct {
	name string // as assigned
	dir  string // inside the root
	part *partFile[T]
}

// partFile is an open part file.
type partFile[T any] struct {
	out     partOut
	bw      *bufio.Writer
	cw      *countingWriter
	bulk    BulkWriter[T]
	final   string
	created time.Time
	last    time.Time
}

// countingWriter counts the bytes that reach the file (through the test
// seam, if any).
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// size is the part file's length including buffered bytes.
func (p *partFile[T]) size() int64 { return p.cw.n + int64(p.bw.Buffered()) }

var _ sink.CommittingWriter[string, committable] = (*writer[string])(nil)
var _ sink.StatefulCommittingWriter[string, committable, writerState] = (*writer[string])(nil)

func (s *fileSink[T]) newWriter(ic sink.InitContext, states []writerState) (*writer[T], error) {
	return s.newWriterCtx(context.Background(), ic, states)
}

func (s *fileSink[T]) newWriterCtx(ctx context.Context, ic sink.InitContext, states []writerState) (*writer[T], error) {
	if err := checkJobID(ic.JobID()); err != nil {
		return nil, err
	}
	var dest partDest
	if s.cfg.store != nil {
		dest = s.newObjectDest(ctx)
	} else {
		d, err := s.newLocalDest()
		if err != nil {
			return nil, err
		}
		dest = d
	}
	w := &writer[T]{s: s, dest: dest, sub: ic.SubtaskIndex(), par: ic.Parallelism(), attempt: ic.Attempt(), tag: newAttemptTag(),
		names:   partNames{prefix: s.cfg.prefix, suffix: s.cfg.suffix, job: ic.JobID()},
		buckets: map[string]*bucket[T]{}, wm: math.MinInt64}
	_, w.basePath = s.buckets.(basePathBuckets[T])
	w.rolling, w.defRoll = s.cfg.rolling.(DefaultRollingPolicy)
	restoredID, restored := ic.RestoredCheckpointID()
	w.restoredID = restoredID
	restored = restored || states != nil
	// Every start cleans up: a job restarted (or started again after a
	// crash before its first checkpoint, with the same job id) finds the
	// in-progress files or unfinished uploads of its aborted attempts.
	// Only this job's files are touched.
	next, err := dest.recover(ctx, strayRequest{names: w.names, sub: w.sub, par: w.par, attempt: w.attempt,
		live: &s.live, states: states, restored: restored})
	if err != nil {
		dest.close()
		return nil, err
	}
	w.next = next
	s.live.add(w.liveKey())
	for _, st := range states {
		if st.Subtask == w.sub {
			w.next = max(w.next, st.NextCounter)
		}
	}
	for _, st := range states {
		w.held = append(w.held, st.Held...)
		w.heldSince = restoredID
		for _, ip := range st.InProgress {
			if err := w.resume(ctx, ip); err != nil {
				w.Close()
				return nil, err
			}
		}
	}
	return w, nil
}

func (w *writer[T]) liveKey() liveKey { return liveKey{w.names.job, w.sub, w.attempt} }

// baseParser parses the base name of a path inside the root with a
// leftover scheme (part file names hold no '/').
type baseParser struct{ leftover.Scheme }

func (b baseParser) Parse(p string) (int, int64, bool) { return b.Scheme.Parse(untagged(path.Base(p))) }

// strayScheme is the leftover scheme of the in-progress files of a job:
// .<prefix>-<job>-<subtask>-<counter><suffix>.inprogress, or
// .<prefix>-<subtask>-<counter><suffix>.inprogress for job "" (names from
// before job ids).
func (n partNames) strayScheme(job string) leftover.Scheme {
	pre := "." + n.prefix + "-"
	if job != "" {
		pre += job + "-"
	}
	return leftover.Scheme{Prefix: pre, Suffix: n.suffix + ".inprogress"}
}

// resume continues an in-progress file of a restored state from its
// checkpointed length: in a copy named with this writer's tag (see
// resumedName), never in the restored file itself.
func (w *writer[T]) resume(ctx context.Context, ip inProgressFile) error {
	dir, err := bucketDir(ip.Bucket)
	if err != nil {
		return err
	}
	out, err := w.dest.resume(ctx, ip, w.tag)
	if err != nil {
		return err
	}
	if t := out.temp(); t != "" && t != ip.Temp {
		// The restored file is deleted once a checkpoint after this
		// restore completes: no restore needs it then.
		w.pending = append(w.pending, committable{Bucket: ip.Bucket, Temp: ip.Temp, Final: ip.Final, Discard: true})
	}
	p := w.newPart(out, ip.Final, w.s.cfg.now())
	p.cw.n = ip.Size
	if w.s.cfg.compact != nil {
		// A compacting sink finishes restored files rather than
		// appending to them, so that no file mixes the records of two
		// attempts (see committable.Closed).
		if err := w.closePart(ctx, ip.Bucket, p); err != nil {
			return err
		}
		if last := &w.pending[len(w.pending)-1]; last.Compact {
			last.Closed, last.AtRestore = w.restoredID, true
		}
		return nil
	}
	b := w.buckets[ip.Bucket]
	if b == nil {
		b = &bucket[T]{name: ip.Bucket, dir: dir}
		w.buckets[ip.Bucket] = b
	}
	if b.part != nil {
		// Two restored files in one bucket (after rescaling): keep the
		// first open, roll the other.
		return w.closePart(ctx, b.name, p)
	}
	b.part = p
	return nil
}

func (w *writer[T]) newPart(out partOut, final string, now time.Time) *partFile[T] {
	var o io.Writer = out
	if w.s.cfg.wrapFile != nil {
		o = w.s.cfg.wrapFile(out.name(), out)
	}
	cw := &countingWriter{w: o}
	return &partFile[T]{out: out, cw: cw, bw: bufio.NewWriterSize(cw, w.s.cfg.bufferSize), final: final, created: now, last: now}
}

func (w *writer[T]) info(b *bucket[T]) PartFileInfo {
	return PartFileInfo{Bucket: b.name, Size: b.part.size(), Created: b.part.created, LastWrite: b.part.last}
}

func (w *writer[T]) Write(ctx context.Context, v T, c sink.Meta) error {
	now := w.clock()
	var name string
	if !w.basePath {
		var err error
		name, err = w.s.buckets.Bucket(v, BucketContext{Timestamp: c.Timestamp, HasTimestamp: c.HasTimestamp, Watermark: c.Watermark, ProcessingTime: now})
		if err != nil {
			return fmt.Errorf("file sink: assign bucket: %w", err)
		}
	}
	b := w.last
	if b == nil || b.name != name {
		if b = w.buckets[name]; b == nil {
			dir, err := bucketDir(name)
			if err != nil {
				return fmt.Errorf("file sink: bucket: %w", err)
			}
			b = &bucket[T]{name: name, dir: dir}
			w.buckets[name] = b
		}
		w.last = b
	}
	policy := w.s.cfg.rolling
	// Time rules can only change their answer when the clock moved.
	if b.part != nil && !now.Equal(b.part.last) && policy.ShouldRollOnProcessingTime(w.info(b), now) {
		if err := w.roll(ctx, b); err != nil {
			return err
		}
	}
	if b.part == nil {
		if err := w.open(ctx, b, now); err != nil {
			return err
		}
	}
	p := b.part
	if p.bulk != nil {
		if err := p.bulk.Write(v); err != nil {
			return fmt.Errorf("file sink: write %s: %w", p.out.name(), err)
		}
	} else {
		var err error
		w.buf, err = w.s.row.AppendRecord(w.buf[:0], v)
		if err != nil {
			return fmt.Errorf("file sink: encode a record for %s: %w", p.out.name(), err)
		}
		if _, err := p.bw.Write(w.buf); err != nil {
			return fmt.Errorf("file sink: write %s: %w", p.out.name(), err)
		}
	}
	p.last = now
	if c.Watermark > w.wm {
		w.wm = c.Watermark
	}
	if w.defRoll {
		// DefaultRollingPolicy.ShouldRollOnEvent, inline.
		if w.rolling.PartSize > 0 && p.size() >= w.rolling.PartSize {
			return w.roll(ctx, b)
		}
	} else if policy.ShouldRollOnEvent(w.info(b)) {
		return w.roll(ctx, b)
	}
	return nil
}

// open starts a new part file in b, with the first free counter.
func (w *writer[T]) open(ctx context.Context, b *bucket[T], now time.Time) error {
	for range maxCounterProbe {
		final := w.names.final(w.sub, w.next)
		w.next++
		out, err := w.dest.create(ctx, b.dir, final)
		if errors.Is(err, errNameTaken) {
			continue
		}
		if err != nil {
			return fmt.Errorf("file sink: bucket %q: %w", b.name, err)
		}
		p := w.newPart(out, final, now)
		if w.s.bulk != nil {
			bw, err := w.s.bulk.NewWriter(p.bw)
			if err != nil {
				_ = out.abandon(ctx)
				return fmt.Errorf("file sink: start bulk file %s: %w", out.name(), err)
			}
			p.bulk = bw
		}
		b.part = p
		return nil
	}
	return fmt.Errorf("file sink: bucket %q: no free part file name after %d tries", b.name, maxCounterProbe)
}

// roll closes b's open part file and makes it pending.
func (w *writer[T]) roll(ctx context.Context, b *bucket[T]) error {
	p := b.part
	b.part = nil
	return w.closePart(ctx, b.name, p)
}

// closePart finishes and flushes p, ends it for its commit (a local file
// is fsynced and closed, an upload prepared), and queues its committable
// for the next PrepareCommit.
func (w *writer[T]) closePart(ctx context.Context, bucketName string, p *partFile[T]) error {
	var err error
	if p.bulk != nil {
		if err = p.bulk.Finish(); err != nil {
			err = fmt.Errorf("finish: %w", err)
		}
	}
	if err == nil {
		if err = p.bw.Flush(); err != nil {
			err = fmt.Errorf("flush: %w", err)
		}
	}
	var cm committable
	if err == nil {
		cm, err = p.out.finish(ctx)
	} else {
		_ = p.out.abandon(context.WithoutCancel(ctx))
	}
	if err != nil {
		return fmt.Errorf("file sink: %s: %w", p.out.name(), err)
	}
	cm.Bucket, cm.Final, cm.Size = bucketName, p.final, p.cw.n
	if cp := w.s.cfg.compact; cp != nil && cm.Size < cp.SizeThreshold {
		cm.Compact = true
	}
	w.pending = append(w.pending, cm)
	return nil
}

// Flush rolls every open part file at the end of input, so that the final
// checkpoint commits everything; at checkpoints PrepareCommit does the
// work.
func (w *writer[T]) Flush(ctx context.Context, endOfInput bool) error {
	if !endOfInput {
		return nil
	}
	w.ending = true
	w.wm = math.MaxInt64 // every partition is complete
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		if b := w.buckets[name]; b.part != nil {
			if err := w.roll(ctx, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// PrepareCommit rolls the files the policy (or a bulk format, or an object
// store) rolls at a checkpoint, flushes and fsyncs the others, fsyncs the
// directories of new files, and returns the files rolled since the last
// checkpoint (holding back compaction candidates, see [CompactStrategy]).
func (w *writer[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	w.sinceNow = 0
	w.last = nil // buckets without an open file are dropped below
	now := w.clock()
	policy := w.s.cfg.rolling
	rollAll := w.s.bulk != nil || !w.dest.keepsOpen()
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		b := w.buckets[name]
		if b.part == nil {
			delete(w.buckets, name)
			continue
		}
		info := w.info(b)
		if rollAll || policy.ShouldRollOnCheckpoint(info) || policy.ShouldRollOnProcessingTime(info, now) || w.partitionDue(b, now) {
			if err := w.roll(ctx, b); err != nil {
				return nil, err
			}
			delete(w.buckets, name)
			continue
		}
		if err := b.part.bw.Flush(); err != nil {
			return nil, fmt.Errorf("file sink: %s: flush: %w", b.part.out.name(), err)
		}
		if err := b.part.out.sync(); err != nil {
			return nil, fmt.Errorf("file sink: %s: %w", b.part.out.name(), err)
		}
	}
	if err := w.dest.checkpoint(ctx); err != nil {
		return nil, err
	}
	out := w.pending
	w.pending = nil
	for i := range out {
		if out[i].Compact && !out[i].AtRestore {
			out[i].Closed = checkpointID
		}
	}
	out = w.holdBack(out, checkpointID)
	if w.s.cfg.partCommit != nil {
		out = append(out, w.marker(checkpointID))
	}
	return out, nil
}

// holdBack moves the compaction candidates of out to the held files when
// CheckpointsBeforeCompaction > 1, and releases held files: all of them at
// the first checkpoint whose id is a multiple of it since files are held,
// at the end of input, or when compaction is off (a restore without it);
// those of a bucket whose held files reach the size threshold.
func (w *writer[T]) holdBack(out []committable, checkpointID int64) []committable {
	cp := w.s.cfg.compact
	every := int64(0)
	if cp != nil {
		every = int64(cp.CheckpointsBeforeCompaction)
	}
	if every <= 1 && len(w.held) == 0 {
		return out
	}
	if every > 1 && !w.ending {
		keep := out[:0]
		for _, c := range out {
			if c.Compact {
				if len(w.held) == 0 {
					w.heldSince = checkpointID
				}
				w.held = append(w.held, c)
			} else {
				keep = append(keep, c)
			}
		}
		out = keep
	}
	sizes := map[string]int64{}
	for _, h := range w.held {
		sizes[h.Bucket] += h.Size
	}
	all := every <= 1 || w.ending || checkpointID/every != w.heldSince/every
	keep := w.held[:0]
	for _, h := range w.held {
		switch {
		case cp == nil:
			h.Compact, h.Closed, h.AtRestore = false, 0, false
			out = append(out, h)
		case all || sizes[h.Bucket] >= cp.SizeThreshold:
			out = append(out, h)
		default:
			keep = append(keep, h)
		}
	}
	w.held = slices.Clip(keep)
	return out
}

func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// SnapshotState records the counter and the open files with their synced
// lengths (PrepareCommit ran just before).
func (w *writer[T]) SnapshotState(context.Context, int64) ([]writerState, error) {
	st := writerState{JobID: w.names.job, Subtask: w.sub, Parallelism: w.par, NextCounter: w.next, Held: slices.Clone(w.held)}
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		b := w.buckets[name]
		if b.part != nil {
			st.InProgress = append(st.InProgress, inProgressFile{Bucket: b.name, Temp: b.part.out.temp(), Final: b.part.final, Size: b.part.size()})
		}
	}
	return []writerState{st}, nil
}

// Close releases the open files without making anything visible: local
// files stay in progress, for a restore to resume or remove; uploads are
// aborted (their records are replayed from the last checkpoint). Prepared
// files stay for the committer or for the next start's cleanup.
func (w *writer[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.s.live.remove(w.liveKey())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, b := range w.buckets {
		if b.part != nil {
			if err := b.part.out.abandon(ctx); err != nil {
				errs = append(errs, fmt.Errorf("file sink: release %s: %w", b.part.out.name(), err))
			}
			b.part = nil
		}
	}
	errs = append(errs, w.dest.close())
	return errors.Join(errs...)
}
