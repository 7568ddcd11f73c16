// Package file is sluice's file system connector: a split-based source
// (Flink's FileSource) and an exactly-once, two-phase-commit sink (Flink's
// FileSink) for local file systems.
//
// # Source
//
// [NewSource] reads the files under one or more paths — files, directories
// (read recursively) or glob patterns — with a [Format]: [TextLines],
// [CSV] (optionally with a header), [JSONLines], [AvroFile] (Avro object
// container files, optionally through a reader schema) or [ParquetFile].
// Files ending in .gz or .zst are decompressed. Names starting with '.' or
// '_' are skipped ([FileFilter] changes that).
//
// The enumerator turns every file into a [Split]; an uncompressed file in
// a splittable (line-based) format that is larger than [BlockSize] becomes
// one split per block. A block reads the records that start inside it, so
// every record is read by exactly one split whatever the block size.
// Readers ask for a split whenever they have none (pull assignment), so
// fast readers take more files.
//
// A split carries its progress: the byte offset of the next record (in the
// decompressed stream for compressed files) and a number of records to skip
// after it. A checkpoint stores that position, and recovery resumes in the
// middle of the file: by seeking, or for compressed files by decompressing
// and discarding up to the offset. Avro container files resume at the
// block that holds the next record, skipping the records of the block
// already read; Parquet files at the row number. Formats that need the
// whole file (a header, a footer) implement [RandomAccessFormat] and read
// through io.ReaderAt.
//
// By default the source is bounded: it lists its paths once and ends when
// every file has been read. With [ContinuousDiscovery] it lists them
// periodically and reads new files; a file already read is never read
// again (even if it changes, so write files under a hidden name and rename
// them into place). The enumerator's state holds the unassigned splits and
// the paths already read that were still present at the last listing, so
// it is bounded by the number of files under the paths.
//
// A record the format cannot decode fails the reader with a [*RecordError]
// naming the file, line, byte offset and an excerpt of the record
// ([FailOnMalformed], the default); the error reports itself as
// restart.ErrUnrecoverable, so the job fails at once instead of restarting
// into the same record. Or it is skipped, counted in numRecordsInErrors and
// logged at a bounded rate ([SkipMalformed]), or replaced by a dead letter
// that [MalformedAs] makes of it ([EmitMalformed]), which the job routes to
// a sink of its own: emitted in the split's order, it is read exactly once.
// [PositionAs] passes every good record with its [Position] (split, file,
// byte offset), so that a later failure can name where it was read
// ([LineAt] finds the line then); formats read in batches still are.
//
// # Sink
//
// [NewRowSink] writes records with a [RowFormat] ([LinesFormat],
// [CSVFormat], [JSONLinesFormat]); [NewBulkSink] with a [BulkFormat]:
// [GzipBulk], [AvroBulk] (Avro object container files) or [ParquetBulk].
// Both return a sink already wrapped with sink.NewStatefulTwoPhase, ready
// for stream.SinkTo.
//
// # Avro and Parquet
//
// [AvroFile], [AvroBulk], [ParquetFile] and [ParquetBulk] read and write
// map[string]any records in the value contract of CLI pipelines (int64,
// float64, json.Number for decimals, string, bool, nil, []byte, time.Time,
// []any, map[string]any). Both bulk formats take an Avro record schema
// (JSON), so one schema language describes every file format; writers
// coerce values to it, and errors name the field path. Options and
// defaults: [AvroCodec] (snappy), [AvroBlockSize] (64000 bytes),
// [ParquetCompression] (snappy), [ParquetRowGroupSize] (128 MiB). README.md
// has the type mapping tables.
//
// A [BucketAssigner] picks each record's directory under the base
// directory: [DateTimeBuckets] (Go time layout, time zone, event or
// processing time; the default is "2006-01-02--15", UTC, processing time),
// [BasePathBuckets], [HivePartitions] and [HivePartitionsOf]
// (name=value/… from a map record's fields and times, Hive's escaping and
// default partition), or any [BucketFunc]. Bucket paths are resolved with
// os.Root, so no rendered value — "..", an absolute path, a symbolic link
// — can reach outside the base directory; such a record fails the write.
//
// A part file lives through three states:
//
//	in progress  .part-<job>-<subtask>-<counter><suffix>.inprogress   written, hidden
//	pending      same name, closed and fsynced at a checkpoint        in the checkpoint's committables
//	finished     part-<job>-<subtask>-<counter><suffix>               renamed by the committer, directory fsynced
//
// <job> is the job's id (sink.InitContext.JobID: created at the job's
// first start, kept in its checkpoints and savepoints), so jobs writing
// under one base directory never create, remove or compact each other's
// files.
//
// A [RollingPolicy] decides when an in-progress file closes:
// [DefaultRolling] (128 MiB, 60 s since creation, 60 s of inactivity) or
// [OnCheckpointRolling]; bulk formats roll at every checkpoint. A row file
// that stays open across a checkpoint is flushed and fsynced, and its
// length goes into the writer's state.
//
// Recovery from checkpoint n commits n's pending files again (a file
// already renamed counts as committed), truncates the files that were open
// at n to their recorded length and appends to them, removes the hidden
// files written after n (their counters are at or above the counter stored
// in n), and continues the counters; a name that exists is never reused.
// After a rescale the writer that restored an old subtask's state removes
// that subtask's hidden files written after n, whichever subtask it now
// is (the rule of package sink/leftover), so a scale-down leaves nothing
// behind.
// A job that starts without a checkpoint to restore removes its own
// in-progress files: those of an attempt that failed before the first
// checkpoint completed, or of a run killed before it (the CLI keeps the
// job id in the checkpoint directory, so the next run has the same id).
// Files named before job ids (part-<subtask>-<counter>) listed in a
// restored checkpoint are still committed, resumed and cleaned up.
// A write, flush or fsync error — a full disk, a permission problem —
// fails the write or the checkpoint with an error naming the file and
// wrapping the cause; after the job restarts nothing is lost.
//
// # Compaction
//
// [Compact] (off by default; Flink's FileSink.enableCompact) merges small
// part files. A part file smaller than [CompactStrategy].SizeThreshold when
// it is finished is a candidate: its checkpoint's committer leaves it
// hidden, and the sink's global committer (sink.GlobalCommitter), which
// runs after the subtasks committed, merges each bucket's candidates into
// <prefix>-<job>-compacted-<checkpoint>-<n><suffix> with a [Compactor]:
// [ConcatCompactor] (the default: row formats and gzip members can be
// concatenated) or [RecordWiseCompactor] (decode and re-encode, for formats
// with headers or footers). With CheckpointsBeforeCompaction writers hold
// candidates back for several checkpoints, in their state, so that one
// compaction merges more files.
//
// Readers of the output directory see every record once, whatever
// crashes: candidates stay hidden until the compacted file appears by an
// atomic rename, and each compaction is a redo log (a manifest naming
// sources and target, written and fsynced first) that the global committer
// finishes when it starts and before each commit. Committables seen again
// after a restore are skipped once their files are gone. Compacted files
// keep the records of each input split in order; for that, a compacting
// sink finishes the files that were open at the restored checkpoint
// instead of appending to them.
//
// # Partition commit
//
// [PartitionCommit] (off by default; Flink's sink.partition-commit.*)
// tells policies — [SuccessFile], a Hive Metastore [PartitionCommitter] —
// that a Hive-style partition is complete: after the checkpoint that made
// its files visible, once its trigger fired (process time: creation +
// delay; partition time: the partition's time + delay reached the minimum
// watermark of the writers) and no writer holds an unfinished file of it.
// The global committer keeps the pending partitions in a hidden state
// file, so they survive restores; policies must be idempotent.
//
// # Object storage
//
// [WithObjectStore] puts a sink's part files on an [ObjectStore] instead
// of the local file system: each part file is an upload, prepared (not
// completed) at the checkpoint — the prepared upload is the committable —
// and completed by the committer; recovery completes restored uploads
// (an object already there counts as committed) and aborts the job's
// unfinished uploads written after the restored checkpoint.
// [WithSourceFS] lists and reads a source's paths through a [SourceFS].
// Package connectors/s3 implements both for S3-compatible storage.
//
// # Options
//
// Source and sink options are [SourceOption] and [SinkOption] values; each
// option's documentation states its default, and README.md in this
// directory has a table of them.
package file
