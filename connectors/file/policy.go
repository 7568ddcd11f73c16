package file

import (
	"fmt"
	"path"
	"time"
)

// PartFileInfo describes an open part file to a [RollingPolicy].
type PartFileInfo struct {
	// Bucket is the part file's bucket path.
	Bucket string
	// Size is the number of bytes written to it, including buffered ones.
	Size int64
	// Created and LastWrite are processing times.
	Created, LastWrite time.Time
}

// RollingPolicy decides when an open part file is closed and a new one
// started (Flink's RollingPolicy). Rolled files become pending and are
// committed (made visible) with the next completed checkpoint. The
// writer calls it on its subtask's goroutine. A [DefaultRollingPolicy]
// given as the policy itself (not wrapped) is applied by the writer
// without calling ShouldRollOnEvent per record, with the same answers.
type RollingPolicy interface {
	// ShouldRollOnEvent is asked after every record written.
	ShouldRollOnEvent(p PartFileInfo) bool
	// ShouldRollOnProcessingTime is asked on a record written to the
	// file's bucket when the writer's clock moved since the file's last
	// record (the clock is read every 64 records) and, for every open
	// file, at every checkpoint.
	ShouldRollOnProcessingTime(p PartFileInfo, now time.Time) bool
	// ShouldRollOnCheckpoint is asked at every checkpoint. A file that is
	// not rolled stays open: its length is recorded in the checkpoint.
	ShouldRollOnCheckpoint(p PartFileInfo) bool
}

// DefaultRollingPolicy rolls a part file when it reaches PartSize bytes,
// when it has been open for RolloverInterval, or when nothing was written
// to it for InactivityInterval. A zero field disables its rule. Time rules
// are checked when the bucket gets a record and at checkpoints, so a file
// rolls at the first of those after its time is up.
type DefaultRollingPolicy struct {
	PartSize           int64
	RolloverInterval   time.Duration
	InactivityInterval time.Duration
}

// DefaultRolling returns Flink's defaults: 128 MiB, 60 s rollover, 60 s
// inactivity.
func DefaultRolling() DefaultRollingPolicy {
	return DefaultRollingPolicy{PartSize: 128 << 20, RolloverInterval: time.Minute, InactivityInterval: time.Minute}
}

// ShouldRollOnEvent reports whether the file reached PartSize.
func (d DefaultRollingPolicy) ShouldRollOnEvent(p PartFileInfo) bool {
	return d.PartSize > 0 && p.Size >= d.PartSize
}

// ShouldRollOnProcessingTime applies RolloverInterval and
// InactivityInterval.
func (d DefaultRollingPolicy) ShouldRollOnProcessingTime(p PartFileInfo, now time.Time) bool {
	return (d.RolloverInterval > 0 && now.Sub(p.Created) >= d.RolloverInterval) ||
		(d.InactivityInterval > 0 && now.Sub(p.LastWrite) >= d.InactivityInterval)
}

// ShouldRollOnCheckpoint rolls a file that reached PartSize.
func (d DefaultRollingPolicy) ShouldRollOnCheckpoint(p PartFileInfo) bool {
	return d.ShouldRollOnEvent(p)
}

// OnCheckpointRolling rolls every open part file at every checkpoint (and
// never otherwise), so that every completed checkpoint makes all data up to
// it visible.
func OnCheckpointRolling() RollingPolicy { return onCheckpoint{} }

type onCheckpoint struct{}

func (onCheckpoint) ShouldRollOnEvent(PartFileInfo) bool                     { return false }
func (onCheckpoint) ShouldRollOnProcessingTime(PartFileInfo, time.Time) bool { return false }
func (onCheckpoint) ShouldRollOnCheckpoint(PartFileInfo) bool                { return true }

// TimeKind selects the clock of a [DateTimeBuckets] assigner.
type TimeKind int

const (
	// ProcessingTime buckets by the writer's clock when the record is
	// written.
	ProcessingTime TimeKind = iota
	// EventTime buckets by the record's event timestamp; a record without
	// one is an error.
	EventTime
)

// BucketContext is what a [BucketAssigner] knows besides the record.
type BucketContext struct {
	// Timestamp is the record's event time in milliseconds since the epoch;
	// valid when HasTimestamp.
	Timestamp    int64
	HasTimestamp bool
	// Watermark is the writer's current watermark.
	Watermark int64
	// ProcessingTime is the writer's clock. The writer reads its clock
	// once every 64 records and at every checkpoint, so the value may lag
	// by that much.
	ProcessingTime time.Time
}

// BucketAssigner picks the bucket of each record: a directory path
// relative to the sink's base directory, with '/' separators; "" is the
// base directory itself. The path is resolved with os.Root, so an
// absolute path or one that leaves the base directory through ".." or a
// symbolic link fails the write (an error wrapping [ErrBucketEscapes]).
// It is called on the writer's goroutine.
type BucketAssigner[T any] interface {
	Bucket(v T, c BucketContext) (string, error)
}

// BucketFunc adapts a function to a [BucketAssigner].
type BucketFunc[T any] func(v T, c BucketContext) (string, error)

// Bucket calls f.
func (f BucketFunc[T]) Bucket(v T, c BucketContext) (string, error) { return f(v, c) }

// BasePathBuckets writes every record into the base directory.
func BasePathBuckets[T any]() BucketAssigner[T] { return basePathBuckets[T]{} }

// basePathBuckets is BasePathBuckets' assigner; the sink's writer
// recognizes it and skips the call per record.
type basePathBuckets[T any] struct{}

func (basePathBuckets[T]) Bucket(T, BucketContext) (string, error) { return "", nil }

// DateTimeBuckets names buckets by formatting a time with a Go time
// layout (for example "2006-01-02--15", Flink's "yyyy-MM-dd--HH") in loc
// (nil means UTC), taking the record's event time or the processing time.
// A layout may contain '/' to nest directories.
func DateTimeBuckets[T any](layout string, loc *time.Location, kind TimeKind) BucketAssigner[T] {
	if loc == nil {
		loc = time.UTC
	}
	return BucketFunc[T](func(_ T, c BucketContext) (string, error) {
		t := c.ProcessingTime
		if kind == EventTime {
			if !c.HasTimestamp {
				return "", fmt.Errorf("file: DateTimeBuckets with EventTime: the record has no event timestamp")
			}
			t = time.UnixMilli(c.Timestamp)
		}
		return path.Clean("./" + t.In(loc).Format(layout)), nil
	})
}
