package file

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/sink"
)

// CommitTrigger says when a partition is complete (Flink's
// sink.partition-commit.trigger).
type CommitTrigger int

const (
	// ProcessTimeTrigger commits a partition when the processing time
	// passed the partition's creation time plus the delay: the creation
	// time is when the global committer first saw files of it (Flink's
	// process-time). Needs no watermarks; a partition may get more files
	// after its commit (late data is committed again, see
	// [PartitionCommitStrategy]).
	ProcessTimeTrigger CommitTrigger = iota
	// PartitionTimeTrigger commits a partition when the watermark — the
	// minimum over all writers — reached the time extracted from the
	// partition's values plus the delay (Flink's partition-time): for
	// hourly partitions dt=…/hr=… the delay is one hour.
	PartitionTimeTrigger
)

func (t CommitTrigger) String() string {
	switch t {
	case ProcessTimeTrigger:
		return "process-time"
	case PartitionTimeTrigger:
		return "partition-time"
	}
	return "CommitTrigger(" + strconv.Itoa(int(t)) + ")"
}

// PartitionCommitStrategy configures partition commit (Flink's
// sink.partition-commit.*); pass it to [PartitionCommit]. The sink's
// buckets must be Hive-style partitions ([HivePartitionsOf]).
//
// A partition becomes pending when a checkpoint makes files of it
// visible. After each completed checkpoint the sink's global committer
// commits the pending partitions whose trigger fired and in which no
// writer still holds an open (or held-back) file, by calling every
// policy, in order, once per partition; then the partition is no longer
// pending. Writers roll their open files of a partition whose trigger
// fired by their own clock or watermark at the next checkpoint, so a
// partition is committed at most two checkpoints after its trigger fired.
// Every record of a partition that was written before its trigger fired is
// visible when it is committed.
//
// At the end of input (every writer finished) every pending partition is
// committed, whatever the trigger.
//
// Late data (records of a partition that arrive after its commit) is
// written as usual: the partition becomes pending again and is committed
// again once its trigger fires again (for the partition-time trigger at
// once, for the process-time trigger after the delay from the late files'
// commit). Policies must be idempotent: after a failure, or for late
// data, a partition is committed again.
//
// Pending partitions survive failures: the global committer keeps them in
// the hidden file .<prefix>-<job>.partitions in the base directory (an
// object on an object store, which must then implement [ObjectReader]).
type PartitionCommitStrategy struct {
	// Trigger is ProcessTimeTrigger (the default, as in Flink) or
	// PartitionTimeTrigger.
	Trigger CommitTrigger
	// Delay is added to the creation or partition time (default 0; for
	// partition-time with hourly partitions, one hour).
	Delay time.Duration
	// TimeZone is the zone of the partition values' times for
	// PartitionTimeTrigger (Flink's sink.partition-commit.watermark-time-zone;
	// default UTC, as HiveTime formats).
	TimeZone *time.Location
	// TimestampPattern builds the partition's time from its values with
	// $name for the value of partition name, for example "$dt $hr:00:00"
	// (Flink's partition.time-extractor.timestamp-pattern). The result
	// is parsed as "2006-01-02 15:04:05", "2006-01-02 15:04",
	// "2006-01-02T15:04:05" or "2006-01-02". Default: the first
	// partition's value.
	TimestampPattern string
	// Policies are called for each committed partition, in order
	// (Flink's sink.partition-commit.policy.kind): [SuccessFile], a Hive
	// Metastore committer, or any [PartitionCommitter]. At least one.
	Policies []PartitionCommitter
}

// PartitionCommit enables partition commit (off by default); see
// [PartitionCommitStrategy].
func PartitionCommit(s PartitionCommitStrategy) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if len(s.Policies) == 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: PartitionCommit: no policy", ErrInvalidConfig))
		}
		for i, p := range s.Policies {
			if p == nil {
				c.errs = append(c.errs, fmt.Errorf("%w: PartitionCommit: policy %d is nil", ErrInvalidConfig, i))
			}
		}
		if s.Trigger != ProcessTimeTrigger && s.Trigger != PartitionTimeTrigger {
			c.errs = append(c.errs, fmt.Errorf("%w: PartitionCommit: unknown trigger %d", ErrInvalidConfig, s.Trigger))
		}
		if s.Delay < 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: PartitionCommit: Delay %v is negative", ErrInvalidConfig, s.Delay))
		}
		if s.TimeZone == nil {
			s.TimeZone = time.UTC
		}
		s.Policies = slices.Clone(s.Policies)
		c.partCommit = &s
	})
}

// SuccessFileName is the name of the file [SuccessFile] writes.
const SuccessFileName = "_SUCCESS"

// SuccessFile is the policy that writes an empty _SUCCESS file into the
// committed partition's directory (Flink's success-file), on the local
// file system or the sink's object store. Called outside a sink, it
// writes into the local directory p.Location.
func SuccessFile() PartitionCommitter { return successFile{} }

type successFile struct{}

func (successFile) CommitPartition(ctx context.Context, p Partition) error {
	return writeFileDurable(filepath.Join(p.Location, SuccessFileName), nil)
}

// ObjectReader is implemented by an [ObjectStore] that can read objects
// back; partition commit on an object store needs it for its state.
type ObjectReader interface {
	// ReadObject returns the object at key; ok is false if there is none.
	ReadObject(ctx context.Context, key string) (data []byte, ok bool, err error)
}

// ObjectLocator is implemented by an [ObjectStore] that can name an
// object's location as a URL ("s3://bucket/key"); it gives
// Partition.Location on an object store (else the key).
type ObjectLocator interface {
	Location(key string) string
}

// partitionTime extracts a partition's time from its bucket path.
func (s *PartitionCommitStrategy) partitionTime(bucket string) (time.Time, error) {
	vals, err := parsePartitionPath(bucket)
	if err != nil {
		return time.Time{}, err
	}
	text := vals[0].Value
	if s.TimestampPattern != "" {
		text = os.Expand(s.TimestampPattern, func(name string) string {
			for _, v := range vals {
				if v.Name == name {
					return v.Value
				}
			}
			return "$" + name
		})
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, text, s.TimeZone); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("file sink: partition %s: time %q (from the timestamp pattern %q) is not a time like 2006-01-02 15:04:05 or 2006-01-02", bucket, text, s.TimestampPattern)
}

// due reports whether the trigger fired for a partition, by the watermark
// wm or the processing time now; created is the partition's (or the
// part file's) creation time.
func (s *PartitionCommitStrategy) due(bucket string, created, now time.Time, wm int64) (bool, error) {
	if s.Trigger == PartitionTimeTrigger {
		t, err := s.partitionTime(bucket)
		if err != nil {
			return false, err
		}
		return t.Add(s.Delay).UnixMilli() <= wm, nil
	}
	return !created.Add(s.Delay).After(now), nil
}

// parsePartitionPath splits a Hive-style bucket path into its values,
// unescaped.
func parsePartitionPath(bucket string) ([]PartitionValue, error) {
	if bucket == "" || bucket == "." {
		return nil, fmt.Errorf("file sink: partition commit: the base directory is no partition (use Hive-style buckets, HivePartitionsOf)")
	}
	var vals []PartitionValue
	for _, level := range strings.Split(bucket, "/") {
		name, value, ok := strings.Cut(level, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("file sink: partition commit: bucket %q is not Hive-style (name=value/…; use HivePartitionsOf)", bucket)
		}
		vals = append(vals, PartitionValue{Name: hiveUnescape(name), Value: hiveUnescape(value)})
	}
	return vals, nil
}

// hiveUnescape undoes hiveEscape.
func hiveUnescape(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// partitionMarker is the part of a committable that a writer emits at
// every checkpoint when the sink commits partitions: its watermark and the
// partitions in which it holds files that are not visible yet.
type partitionMarker struct {
	// Checkpoint is the checkpoint the marker was emitted at.
	Checkpoint  int64 `json:"checkpoint"`
	Subtask     int   `json:"subtask"`
	Parallelism int   `json:"parallelism"`
	Watermark   int64 `json:"watermark"`
	// Busy lists the buckets with an open or held-back part file.
	Busy []string `json:"busy,omitempty"`
	// Ended: the writer reached the end of its input (Flush(true)).
	Ended bool `json:"ended,omitempty"`
}

// marker returns the writer's partition marker for a checkpoint.
func (w *writer[T]) marker(checkpointID int64) committable {
	busy := map[string]bool{}
	for name, b := range w.buckets {
		if b.part != nil {
			busy[name] = true
		}
	}
	for _, h := range w.held {
		busy[h.Bucket] = true
	}
	return committable{Marker: &partitionMarker{Checkpoint: checkpointID, Subtask: w.sub, Parallelism: w.par, Watermark: w.wm, Busy: slices.Sorted(maps.Keys(busy)), Ended: w.ending}}
}

// partitionDue reports whether the writer should roll b's open file at a
// checkpoint because b's commit trigger fired by the writer's own clock or
// watermark.
func (w *writer[T]) partitionDue(b *bucket[T], now time.Time) bool {
	pc := w.s.cfg.partCommit
	if pc == nil {
		return false
	}
	due, err := pc.due(b.name, b.part.created, now, w.wm)
	return err == nil && due // a bad partition fails in the global committer
}

// WriteWatermark records the writer's watermark for partition commit.
func (w *writer[T]) WriteWatermark(_ context.Context, wm int64) error {
	w.wm = max(w.wm, wm)
	return nil
}

// partitionCommitter is the global committer of a sink that commits
// partitions (after compaction, if the sink compacts).
type partitionCommitter struct {
	inner globalCommitter
	cfg   *PartitionCommitStrategy
	side  sideFiles
	state string // the state file's name in the base directory
	now   func() time.Time
	// pending maps the pending partitions to their creation time (unix
	// ms), as stored in the state file.
	pending map[string]int64
	// marks holds the latest marker of each subtask.
	marks map[int]partitionMarker
	// hook, if set, runs before each policy call (a test seam).
	hook func(bucket string) error
}

// globalCommitter is the file sink's global committer type.
type globalCommitter = sink.GlobalCommitter[committable]

// partitionState is the content of the state file.
type partitionState struct {
	Pending map[string]int64 `json:"pending"`
}

func (s *fileSink[T]) newPartitionCommitter(ctx context.Context, jobID string, inner globalCommitter) (*partitionCommitter, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	c := &partitionCommitter{inner: inner, cfg: s.cfg.partCommit, now: s.cfg.now, marks: map[int]partitionMarker{},
		state: "." + s.cfg.prefix + "-" + jobID + ".partitions", hook: s.cfg.partCommitHook}
	if s.cfg.store != nil {
		r, ok := s.cfg.store.(ObjectReader)
		if !ok {
			return nil, fmt.Errorf("%w: PartitionCommit on object store %T needs it to implement file.ObjectReader (for its state)", ErrInvalidConfig, s.cfg.store)
		}
		c.side = &objectSide{store: s.cfg.store, reader: r, prefix: s.dir}
	} else {
		root, err := s.openRoot()
		if err != nil {
			return nil, err
		}
		c.side = &localSide{root: root, dir: s.dir}
	}
	b, ok, err := c.side.read(ctx, c.state)
	if err != nil {
		c.side.close()
		return nil, fmt.Errorf("file sink: partition commit: read state %s: %w", c.side.location(c.state), err)
	}
	var st partitionState
	if ok {
		if err := json.Unmarshal(b, &st); err != nil {
			c.side.close()
			return nil, fmt.Errorf("file sink: partition commit: state %s: %w", c.side.location(c.state), err)
		}
	}
	c.pending = st.Pending
	if c.pending == nil {
		c.pending = map[string]int64{}
	}
	return c, nil
}

// CommitGlobal runs the compaction (if any), adds the partitions of the
// committed files to the pending ones, and commits those whose trigger
// fired and that no writer holds a file of. The state is stored after the
// policies ran: a failure in between commits the partitions again (the
// committables are handed over again), which the policies allow.
func (c *partitionCommitter) CommitGlobal(ctx context.Context, checkpointID int64, committed []committable) error {
	if c.inner != nil {
		if err := c.inner.CommitGlobal(ctx, checkpointID, committed); err != nil {
			return err
		}
	}
	now := c.now()
	changed := false
	for _, cm := range committed {
		if m := cm.Marker; m != nil {
			if old, ok := c.marks[m.Subtask]; !ok || old.Checkpoint <= m.Checkpoint {
				c.marks[m.Subtask] = *m
			}
			continue
		}
		if _, ok := c.pending[cm.Bucket]; !ok {
			c.pending[cm.Bucket] = now.UnixMilli()
			changed = true
		}
	}
	wm, busy, ended, ok := c.watermark()
	if ok {
		for _, bucket := range slices.Sorted(maps.Keys(c.pending)) {
			if busy[bucket] {
				continue
			}
			due, err := c.cfg.due(bucket, time.UnixMilli(c.pending[bucket]), now, wm)
			if err != nil {
				return err
			}
			due = due || ended // at the end of input every partition is complete
			if !due {
				continue
			}
			if err := c.commit(ctx, bucket); err != nil {
				return fmt.Errorf("file sink: commit partition %s (checkpoint %d): %w", bucket, checkpointID, err)
			}
			delete(c.pending, bucket)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	b, err := json.Marshal(partitionState{Pending: c.pending})
	if err != nil {
		return err
	}
	if err := c.side.write(ctx, c.state, b); err != nil {
		return fmt.Errorf("file sink: partition commit: store state %s: %w", c.side.location(c.state), err)
	}
	return nil
}

// watermark returns the minimum watermark over the writers, the
// partitions some writer holds files of, and whether every writer reached
// the end of its input, from each writer's latest marker;
// ok is false until every writer of the parallelism of the newest marker
// reported.
func (c *partitionCommitter) watermark() (wm int64, busy map[string]bool, ended, ok bool) {
	par, newest := 0, int64(math.MinInt64)
	for _, m := range c.marks {
		if m.Checkpoint > newest || m.Checkpoint == newest && m.Parallelism > par {
			par, newest = m.Parallelism, m.Checkpoint
		}
	}
	// After a rescale, drop the markers of subtasks that no longer run.
	for sub := range c.marks {
		if sub >= par {
			delete(c.marks, sub)
		}
	}
	if par == 0 || len(c.marks) < par {
		return 0, nil, false, false
	}
	wm, busy, ended = math.MaxInt64, map[string]bool{}, true
	for _, m := range c.marks {
		wm = min(wm, m.Watermark)
		ended = ended && m.Ended
		for _, b := range m.Busy {
			busy[b] = true
		}
	}
	return wm, busy, ended, true
}

// commit calls every policy for one partition.
func (c *partitionCommitter) commit(ctx context.Context, bucket string) error {
	vals, err := parsePartitionPath(bucket)
	if err != nil {
		return err
	}
	dir, err := bucketDir(bucket)
	if err != nil {
		return err
	}
	p := Partition{Path: dir, Location: c.side.location(dir), Values: vals}
	for _, pol := range c.cfg.Policies {
		if c.hook != nil {
			if err := c.hook(bucket); err != nil {
				return err
			}
		}
		if _, ok := pol.(successFile); ok {
			err = c.side.write(ctx, path.Join(dir, SuccessFileName), nil)
		} else {
			err = pol.CommitPartition(ctx, p)
		}
		if err != nil {
			return fmt.Errorf("policy %T: %w", pol, err)
		}
	}
	return nil
}

func (c *partitionCommitter) Close() error {
	err := c.side.close()
	if c.inner != nil {
		err = errors.Join(c.inner.Close(), err)
	}
	return err
}

// sideFiles are the files the global committer writes besides part files:
// its state and _SUCCESS files.
type sideFiles interface {
	read(ctx context.Context, name string) ([]byte, bool, error)
	// write replaces name atomically and durably.
	write(ctx context.Context, name string, data []byte) error
	location(name string) string
	close() error
}

type localSide struct {
	root *os.Root
	dir  string
}

func (l *localSide) read(_ context.Context, name string) ([]byte, bool, error) {
	b, err := l.root.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	return b, err == nil, err
}

func (l *localSide) write(_ context.Context, name string, data []byte) error {
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".tmp")
	f, err := l.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.root.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(l.root, path.Dir(name))
	}
	return err
}

func (l *localSide) location(name string) string {
	return filepath.Join(l.dir, filepath.FromSlash(name))
}
func (l *localSide) close() error { return l.root.Close() }

// writeFileDurable writes a file and fsyncs it and its directory.
func writeFileDurable(name string, data []byte) error {
	root, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return err
	}
	defer root.Close()
	return (&localSide{root: root, dir: filepath.Dir(name)}).write(context.Background(), filepath.Base(name), data)
}

type objectSide struct {
	store  ObjectStore
	reader ObjectReader
	prefix string
}

func (o *objectSide) key(name string) string { return path.Join(o.prefix, name) }

func (o *objectSide) read(ctx context.Context, name string) ([]byte, bool, error) {
	return o.reader.ReadObject(ctx, o.key(name))
}

func (o *objectSide) write(ctx context.Context, name string, data []byte) error {
	key := o.key(name)
	up, err := o.store.Create(ctx, key)
	if err != nil {
		return err
	}
	if _, err := bytes.NewReader(data).WriteTo(up); err != nil {
		_ = up.Abort(context.WithoutCancel(ctx))
		return err
	}
	h, err := up.Prepare(ctx)
	if err != nil {
		_ = up.Abort(context.WithoutCancel(ctx))
		return err
	}
	return o.store.Complete(ctx, key, h)
}

func (o *objectSide) location(name string) string {
	if l, ok := o.store.(ObjectLocator); ok {
		return l.Location(o.key(name))
	}
	return o.key(name)
}

func (o *objectSide) close() error { return nil }
