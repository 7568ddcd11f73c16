// Package iceberg is sluice's Apache Iceberg sink: it appends records to
// an Iceberg table exactly once, through the sink's global committer, as
// Flink's Iceberg sink does. It is built on github.com/apache/iceberg-go.
//
// # How it commits
//
// Each writer turns records into rows ([Row]: column name to value) and
// writes them with parquet-go as Parquet data files (one per partition,
// the partition computed with the spec's transforms; Iceberg field ids in
// the Parquet schema; column statistics from the values written) into
// the table's data location, ending them when the rows written reach
// [TargetFileSize] and at every checkpoint. Tables with settings that
// writer does not support (another file format or metrics mode, bloom
// filters, a compression level) are written through iceberg-go's Arrow
// writer instead, chosen automatically (see README.md). The files are durable but not part of the table. At the
// checkpoint the writer's committable describes them (path, record count,
// size, partition tuple, statistics). The per-subtask committer has
// nothing to do; the global committer then appends the files of each
// completed checkpoint to the table in ONE snapshot (a fast append),
// whose summary records sluice.job-id, sluice.operator-id and
// sluice.max-committed-checkpoint-id (Flink: flink.job-id,
// flink.operator-id, flink.max-committed-checkpoint-id).
//
// Exactly once across failures: before committing checkpoint n the global
// committer walks the snapshot ancestry of the main branch back to the
// newest snapshot of this job and operator; if it recorded a checkpoint ≥
// n, the committables of n are a re-delivery (the job failed after the
// snapshot was committed, before the runtime learnt it): its files that
// the table's data files already hold are skipped, and any it does not
// (part of a checkpoint delivered late, after a subtask's regional
// restart) are appended in a snapshot marked sluice.late-checkpoint-id.
// The commit pins the main branch to the snapshot it checked; a commit
// that raced with another writer fails in the catalog's compare-and-swap
// and is retried ([CommitRetries]) on the table's fresh metadata, after
// the same check. Data files written by an attempt that failed before its
// checkpoint completed are never referenced by the table (their
// committables died with the checkpoint); they stay in the data
// directory as orphans, which Iceberg's remove-orphan-files maintenance
// deletes (iceberg-go: table.Transaction / DeleteOrphanFiles, Spark:
// remove_orphan_files, with an age threshold longer than a checkpoint
// interval).
//
// Restore a job from its latest checkpoint (or a later savepoint): the
// skip is by checkpoint id, so restoring an older checkpoint of the same
// job skips the new checkpoints whose ids the table already holds, as in
// Flink.
//
// Only appends are supported: no upserts, no equality or position
// deletes, no overwrite. A table with an identifier field gets appended
// rows like any other (see the README for why). [Compaction] optionally
// rewrites the small files of the checkpoints committed since the last
// compaction (every n or more) in one atomic replace snapshot.
//
// # Catalogs and tables
//
// [SQLCatalog] is Iceberg's SQL catalog (PyIceberg's SqlCatalog, Java's
// JdbcCatalog) on SQLite (modernc.org/sqlite, pure Go) or PostgreSQL
// (pgx). [RESTCatalog] talks to an Iceberg REST catalog. Warehouses are
// directories (file://) or S3-compatible object storage (s3://, with
// s3.endpoint, s3.region, s3.force-virtual-addressing, s3.access-key-id and
// s3.secret-access-key as catalog properties).
//
// By default the table must exist; [CreateTable] creates it (and its
// namespace) from columns ([ParseColumns]: boolean, int, long, float,
// double, string, binary, date, timestamp, timestamptz) and a partition
// spec ([ParsePartitionSpec]: identity, year, month, day, hour, bucket,
// truncate); [CreateTableFromRecords] creates it from the first record's
// fields. [AddColumns] adds a record's new fields as optional columns
// (schema evolution). [EventTimeColumn] fills a timestamp column from the
// records' event time, for day/hour partitions by event time. Nested,
// decimal, uuid and nanosecond columns are not supported.
package iceberg
