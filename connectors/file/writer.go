package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/sink/leftover"
)

// maxCounterProbe bounds the search for a free part file name.
const maxCounterProbe = 1 << 20

// writer is one subtask's file sink writer. It is used from the subtask's
// goroutine only.
type writer[T any] struct {
	s         *fileSink[T]
	root      *os.Root
	names     partNames
	sub, par  int
	attempt   int // sink.InitContext.Attempt
	next      int64
	buckets   map[string]*bucket[T]
	last      *bucket[T]    // the bucket of the last record, or nil
	pending   []committable // rolled since the last PrepareCommit
	held      []committable // compaction candidates held back (CheckpointsBeforeCompaction)
	heldSince int64         // the checkpoint since which files are held
	// restoredID is the checkpoint the writer was restored from (0: none).
	restoredID int64
	ending     bool // Flush(true) was called: release everything held
	dirtyDirs  map[string]bool
	buf        []byte
	closed     bool
	// The processing-time clock is read every clockEvery records (and at
	// every checkpoint), not for every record: time.Now costs as much as
	// writing a short line.
	now      time.Time
	sinceNow int
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
	made bool   // dir is known to exist
	part *partFile[T]
}

// partFile is an open part file.
type partFile[T any] struct {
	f       *os.File
	bw      *bufio.Writer
	cw      *countingWriter
	bulk    BulkWriter[T]
	temp    string
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
	if err := checkJobID(ic.JobID()); err != nil {
		return nil, err
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	w := &writer[T]{s: s, root: root, sub: ic.SubtaskIndex(), par: ic.Parallelism(), attempt: ic.Attempt(),
		names:   partNames{prefix: s.cfg.prefix, suffix: s.cfg.suffix, job: ic.JobID()},
		buckets: map[string]*bucket[T]{}, dirtyDirs: map[string]bool{}}
	restoredID, restored := ic.RestoredCheckpointID()
	w.restoredID = restoredID
	restored = restored || states != nil
	// Every start cleans up: a job restarted (or started again after a
	// crash before its first checkpoint, with the same job id) finds the
	// in-progress files of its aborted attempts. Only this job's files
	// are touched.
	if err := w.removeStrays(states, restored); err != nil {
		root.Close()
		return nil, err
	}
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
			if err := w.resume(ip); err != nil {
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

func (b baseParser) Parse(p string) (int, int64, bool) { return b.Scheme.Parse(path.Base(p)) }

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

// removeStrays removes the hidden part files that aborted attempts of this
// job left behind, by the rule of package sink/leftover (the names'
// sequence numbers are the part file counters):
//
//   - nothing restored (a restart, or a new start of the same job after a
//     crash, before the first completed checkpoint): every in-progress
//     file of a subtask j with j % parallelism == this subtask;
//   - restored: for each restored state that reached this writer, the
//     files of that state's subtask j whose counter is at or above its
//     NextCounter and that no state of this writer lists as open or held.
//     The runtime hands each state to exactly one writer and builds every
//     writer of an attempt before any writes, so this holds also when j
//     runs again as another writer (a scale-down whose states went
//     round-robin) — but not while writer j is open in another attempt (a
//     region restarted alone, see liveWriters). Subtasks with no restored
//     state are left alone: a writer resumes the open files of the states
//     it got under their old names, so a file named after a subtask
//     beyond the restored parallelism may still be open in another
//     writer's state.
//
// Files of checkpoints that completed are kept: their counters are below
// NextCounter, which stays above every hidden file of the subtask's name
// that survives a start (see the end of removeStrays). Files of other jobs
// (another job id in the name) are never touched; files named before job
// ids count as this job's only where a restored state of this job uses
// such names. Both namings are looked at for an old state, since files
// written after a restore from it carry the job id.
func (w *writer[T]) removeStrays(states []writerState, restored bool) error {
	var needed []string
	byJob := map[string][]leftover.State{w.names.job: nil}
	if restored {
		for _, st := range states {
			ls := leftover.State{Subtask: st.Subtask, From: st.NextCounter}
			if st.Subtask != w.sub && w.s.live.elsewhere(w.names.job, st.Subtask, w.attempt) {
				// A region restarted alone: writer st.Subtask runs on and
				// writes under its name (see liveWriters).
				ls.From = math.MaxInt64
			}
			byJob[w.names.job] = append(byJob[w.names.job], ls)
			if st.JobID != w.names.job {
				byJob[st.JobID] = append(byJob[st.JobID], ls)
			}
			for _, ip := range st.InProgress {
				d, _ := bucketDir(ip.Bucket)
				needed = append(needed, path.Join(d, ip.Temp))
			}
			for _, h := range st.Held {
				d, _ := bucketDir(h.Bucket)
				needed = append(needed, path.Join(d, h.Temp))
			}
		}
	}
	var existing []string
	pre := "." + w.names.prefix + "-"
	err := fs.WalkDir(w.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), pre) && strings.HasSuffix(d.Name(), ".inprogress") {
			existing = append(existing, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("file sink: look for stray in-progress files under %s: %w", w.s.dir, err)
	}
	var strays []string
	for _, job := range slices.Sorted(maps.Keys(byJob)) {
		got, err := leftover.Abort(leftover.Request{Parser: baseParser{w.names.strayScheme(job)},
			Subtask: w.sub, Parallelism: w.par, Restored: restored, States: byJob[job],
			Existing: existing, Needed: needed})
		if err != nil {
			return fmt.Errorf("file sink: stray in-progress files: %w", err)
		}
		strays = append(strays, got...)
	}
	for _, p := range strays {
		if err := w.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: remove stray in-progress file %s: %w", path.Join(w.s.dir, p), err)
		}
	}
	// Number new files above every hidden file of this subtask's name
	// that stays: after a rescale another writer may hold one (resumed
	// from this subtask's old state, or prepared and not yet committed),
	// and a NextCounter below it would make a later restore remove it as
	// a stray. (Probing for a free name is not enough: finished files
	// that a consumer took away leave gaps below it.)
	removed := make(map[string]bool, len(strays))
	for _, p := range strays {
		removed[p] = true
	}
	own := baseParser{w.names.strayScheme(w.names.job)}
	for _, p := range existing {
		if sub, c, ok := own.Parse(p); ok && sub == w.sub && !removed[p] {
			w.next = max(w.next, c+1)
		}
	}
	return nil
}

// resume reopens an in-progress file of a restored state, truncated to
// its checkpointed length.
func (w *writer[T]) resume(ip inProgressFile) error {
	dir, err := bucketDir(ip.Bucket)
	if err != nil {
		return err
	}
	name := path.Join(dir, ip.Temp)
	f, err := w.root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("file sink: resume in-progress file %s: %w", path.Join(w.s.dir, name), err)
	}
	if err := f.Truncate(ip.Size); err != nil {
		f.Close()
		return fmt.Errorf("file sink: truncate %s to %d bytes: %w", path.Join(w.s.dir, name), ip.Size, err)
	}
	if _, err := f.Seek(ip.Size, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("file sink: seek %s to %d: %w", path.Join(w.s.dir, name), ip.Size, err)
	}
	now := w.s.cfg.now()
	p := w.newPart(f, name, ip.Temp, ip.Final, now)
	p.cw.n = ip.Size
	if w.s.cfg.compact != nil {
		// A compacting sink finishes restored files rather than
		// appending to them, so that no file mixes the records of two
		// attempts (see committable.Closed).
		if err := w.closePart(ip.Bucket, dir, p); err != nil {
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
		return w.closePart(b.name, b.dir, p)
	}
	b.part = p
	return nil
}

func (w *writer[T]) newPart(f *os.File, name, temp, final string, now time.Time) *partFile[T] {
	var out io.Writer = f
	if w.s.cfg.wrapFile != nil {
		out = w.s.cfg.wrapFile(path.Join(w.s.dir, name), f)
	}
	cw := &countingWriter{w: out}
	return &partFile[T]{f: f, cw: cw, bw: bufio.NewWriterSize(cw, w.s.cfg.bufferSize), temp: temp, final: final, created: now, last: now}
}

func (w *writer[T]) info(b *bucket[T]) PartFileInfo {
	return PartFileInfo{Bucket: b.name, Size: b.part.size(), Created: b.part.created, LastWrite: b.part.last}
}

func (w *writer[T]) Write(ctx context.Context, v T, c sink.Meta) error {
	now := w.clock()
	name, err := w.s.buckets.Bucket(v, BucketContext{Timestamp: c.Timestamp, HasTimestamp: c.HasTimestamp, Watermark: c.Watermark, ProcessingTime: now})
	if err != nil {
		return fmt.Errorf("file sink: assign bucket: %w", err)
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
		if err := w.roll(b); err != nil {
			return err
		}
	}
	if b.part == nil {
		if err := w.open(b, now); err != nil {
			return err
		}
	}
	p := b.part
	if p.bulk != nil {
		if err := p.bulk.Write(v); err != nil {
			return fmt.Errorf("file sink: write %s: %w", path.Join(w.s.dir, b.dir, p.temp), err)
		}
	} else {
		w.buf, err = w.s.row.AppendRecord(w.buf[:0], v)
		if err != nil {
			return fmt.Errorf("file sink: encode a record for %s: %w", path.Join(w.s.dir, b.dir, p.temp), err)
		}
		if _, err := p.bw.Write(w.buf); err != nil {
			return fmt.Errorf("file sink: write %s: %w", path.Join(w.s.dir, b.dir, p.temp), err)
		}
	}
	p.last = now
	if policy.ShouldRollOnEvent(w.info(b)) {
		return w.roll(b)
	}
	return nil
}

// open starts a new part file in b, with the first free counter.
func (w *writer[T]) open(b *bucket[T], now time.Time) error {
	if b.dir != "." && !b.made {
		if !w.exists(b.dir) {
			if err := w.root.MkdirAll(b.dir, w.s.cfg.dirMode()); err != nil {
				return fmt.Errorf("file sink: bucket %q: create directory %s: %w", b.name, path.Join(w.s.dir, b.dir), err)
			}
			// The new directories' entries become durable with their
			// parents' fsync at the checkpoint.
			for d := path.Dir(b.dir); ; d = path.Dir(d) {
				w.dirtyDirs[d] = true
				if d == "." {
					break
				}
			}
		}
		b.made = true
	}
	for range maxCounterProbe {
		final := w.names.final(w.sub, w.next)
		temp := inProgress(final)
		w.next++
		if w.exists(path.Join(b.dir, final)) || w.exists(path.Join(b.dir, temp)) {
			continue
		}
		name := path.Join(b.dir, temp)
		f, err := w.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, w.s.cfg.fileMode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("file sink: create %s: %w", path.Join(w.s.dir, name), err)
		}
		w.dirtyDirs[b.dir] = true
		b.part = w.newPart(f, name, temp, final, now)
		if w.s.bulk != nil {
			bw, err := w.s.bulk.NewWriter(b.part.bw)
			if err != nil {
				f.Close()
				b.part = nil
				return fmt.Errorf("file sink: start bulk file %s: %w", path.Join(w.s.dir, name), err)
			}
			b.part.bulk = bw
		}
		return nil
	}
	return fmt.Errorf("file sink: bucket %q: no free part file name after %d tries", b.name, maxCounterProbe)
}

func (w *writer[T]) exists(name string) bool {
	_, err := w.root.Lstat(name)
	return err == nil
}

// roll closes b's open part file and makes it pending.
func (w *writer[T]) roll(b *bucket[T]) error {
	p := b.part
	b.part = nil
	return w.closePart(b.name, b.dir, p)
}

// closePart finishes, flushes, syncs and closes p, and queues its
// committable for the next PrepareCommit.
func (w *writer[T]) closePart(bucketName, dir string, p *partFile[T]) error {
	name := path.Join(w.s.dir, dir, p.temp)
	var err error
	if p.bulk != nil {
		if err = p.bulk.Finish(); err != nil {
			err = fmt.Errorf("finish: %w", err)
		}
	}
	if err == nil {
		err = w.syncPart(p)
	}
	if cerr := p.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	if err != nil {
		return fmt.Errorf("file sink: %s: %w", name, err)
	}
	cm := committable{Bucket: bucketName, Temp: p.temp, Final: p.final, Size: p.cw.n}
	if cp := w.s.cfg.compact; cp != nil && cm.Size < cp.SizeThreshold {
		cm.Compact = true
	}
	w.pending = append(w.pending, cm)
	return nil
}

func (w *writer[T]) syncPart(p *partFile[T]) error {
	if err := p.bw.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
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
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		if b := w.buckets[name]; b.part != nil {
			if err := w.roll(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// PrepareCommit rolls the files the policy (or a bulk format) rolls at a
// checkpoint, flushes and fsyncs the others, fsyncs the directories of new
// files, and returns the files rolled since the last checkpoint (holding
// back compaction candidates, see [CompactStrategy]).
func (w *writer[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	w.sinceNow = 0
	w.last = nil // buckets without an open file are dropped below
	now := w.clock()
	policy := w.s.cfg.rolling
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		b := w.buckets[name]
		if b.part == nil {
			delete(w.buckets, name)
			continue
		}
		info := w.info(b)
		if w.s.bulk != nil || policy.ShouldRollOnCheckpoint(info) || policy.ShouldRollOnProcessingTime(info, now) {
			if err := w.roll(b); err != nil {
				return nil, err
			}
			delete(w.buckets, name)
			continue
		}
		if err := w.syncPart(b.part); err != nil {
			return nil, fmt.Errorf("file sink: %s: %w", path.Join(w.s.dir, b.dir, b.part.temp), err)
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(w.dirtyDirs)) {
		if err := syncDir(w.root, dir); err != nil {
			return nil, fmt.Errorf("file sink: fsync directory %s: %w", path.Join(w.s.dir, dir), err)
		}
		delete(w.dirtyDirs, dir)
	}
	out := w.pending
	w.pending = nil
	for i := range out {
		if out[i].Compact && !out[i].AtRestore {
			out[i].Closed = checkpointID
		}
	}
	return w.holdBack(out, checkpointID), nil
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
			st.InProgress = append(st.InProgress, inProgressFile{Bucket: b.name, Temp: b.part.temp, Final: b.part.final, Size: b.part.size()})
		}
	}
	return []writerState{st}, nil
}

// Close closes the open files without making anything visible: they stay
// in progress, for a restore to resume or remove.
func (w *writer[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.s.live.remove(w.liveKey())
	var errs []error
	for _, b := range w.buckets {
		if b.part != nil {
			errs = append(errs, b.part.f.Close())
			b.part = nil
		}
	}
	errs = append(errs, w.root.Close())
	return errors.Join(errs...)
}
