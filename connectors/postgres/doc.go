// Package postgres is sluice's PostgreSQL connector (on
// github.com/jackc/pgx/v5 and github.com/jackc/pglogrepl): a sink of rows
// into one table, appended with COPY or upserted with INSERT … ON
// CONFLICT (key) DO UPDATE, exactly once with prepared transactions or at
// least once; a bounded snapshot source ([NewSnapshotSource]); and a
// change-data-capture source ([NewCDCSource], [NewDebeziumCDCSource])
// that reads the table and then its changes from a logical replication
// slot. Flink names: JdbcSink.exactlyOnceSink → [NewSink] with
// ExactlyOnce, JdbcSink.sink with an upsert dialect → WriteMode(Upsert),
// Flink CDC's PostgresIncrementalSource → [NewCDCSource].
//
// # Snapshot source
//
// [NewSnapshotSource] reads one table by its key (the primary key, or
// [KeyColumns]: one or more NOT NULL columns of any ordered types; several
// compare as a row value, (a, b) > ($1, $2), in the server's order). Its
// enumerator cuts the table into chunks of
// [ChunkSize] rows at the keys of every ChunkSize-th row (one ordered scan
// of the key, off the coordinator goroutine), one split per chunk, handed
// to readers on request. A reader reads a chunk in pages of [FetchSize]
// rows ordered by key (WHERE key > last AND key <= chunk end ORDER BY key
// LIMIT n); a split's position is the last key read, so a restore resumes
// mid-chunk and reads no row twice. Records are [Change]s with OpRead.
// Each page is one query, so one consistent snapshot of its key range;
// the table as a whole is not (see NewSnapshotSource).
//
// # CDC source
//
// [NewCDCSource] needs wal_level = logical ([ErrWALLevel] otherwise), a
// publication that publishes the table ([Publication], created with
// [CreatePublication]; else [ErrPublicationNotFound]) and a logical
// replication slot of plugin pgoutput ([Slot], created with [CreateSlot];
// else [ErrSlotNotFound]). Its enumerator checks these and creates what it
// may, computes chunks as the snapshot source does, and hands out one
// split per chunk, then one split "stream" that starts at the slot's
// position (its confirmed_flush_lsn).
//
// Readers read the chunks in parallel, in pages of FetchSize rows by key,
// each in a REPEATABLE READ transaction that also records the page's
// snapshot (pg_current_snapshot(): xmin, xmax, the transactions in
// progress) and the WAL position right after the read; no lock is taken.
// A finished chunk's pages go to the enumerator (a source event); the
// reader keeps the finished chunk in its checkpoints until the enumerator
// acknowledged it, and the enumerator passes the pages on to the readers
// only once they are in a completed checkpoint's enumerator state (a
// reader that restarts alone may read its chunk again with other
// snapshots: the pages it reported before are dropped). The stream split
// waits for the pages of every chunk, then streams from the slot's
// position: a change on a key of a page whose snapshot saw the change's
// transaction (the Xid of pgoutput's BEGIN) is in the page already and is
// dropped; one it did not see is emitted. This is the watermark idea of
// DBLog and Flink CDC 2.x with the snapshot itself as the watermark:
// exact, also for transactions that commit while a page is read. Once the
// stream passes the last page's WAL position every change is emitted.
// [SnapshotInStream] reads the pages in the stream split itself, one
// after the other, instead of in chunks. Keys compare as the pages were
// read: integer and uuid keys in Go, any other key (text with its
// collation, numeric, composites) by the server, one query per fetched
// batch of changes while pages remain. Every change must carry the key
// columns: the primary key, the replica identity's columns, or REPLICA
// IDENTITY FULL (generated columns are not replicated).
//
// The stream split's position is the commit LSN of the transaction it is
// in, the number of the table's changes of that transaction emitted, and
// whether all were. A restore starts replication at that LSN and drops
// what was emitted already: no gap and no duplicate, also inside a large
// transaction. The LSN is confirmed to the server (standby status update,
// every [StatusInterval] and when it moves) only once every sink of the
// job committed the checkpoint that holds it
// ([source.CommitListener]): the slot keeps the WAL a restore of the last
// committed checkpoint needs. A restore from an older checkpoint than the
// slot confirmed fails with [ErrSlotAhead].
//
// Change records carry the operation, the before and after images, the
// table, the key, the commit LSN, the commit time and the transaction id.
// Before images need REPLICA IDENTITY FULL on the table (ALTER TABLE t
// REPLICA IDENTITY FULL); with the default identity a delete carries only
// the key columns and an update no before image. An unchanged TOASTed
// column of an update is taken from the before image when there is one,
// otherwise left out of the after image. TRUNCATE of the table fails the
// job. [NewDebeziumCDCSource] emits Debezium's JSON envelope
// ([Change.Debezium]).
//
// A slot holds WAL on the server until it is confirmed: a stopped job
// keeps its slot, and the server keeps every WAL segment since the last
// confirmed LSN (pg_replication_slots.confirmed_flush_lsn) until the job
// runs again or the slot is dropped: SELECT
// pg_drop_replication_slot('<slot>'). Set max_slot_wal_keep_size on the
// server to bound it (a slot past the bound is invalidated, and the job
// fails with its error).
//
// # Rows
//
// [NewSink] takes a row mapper, func(T) ([]any, error), whose values fill
// the columns named by [Columns], in order; [NewMapSink] takes records
// that map column names to values (the CLI's JSON-like records). When a
// writer starts it checks the table: it must exist, every column must
// exist, be writable (not generated) and have a type pgx can encode
// (enums, domains and composites are registered), and Upsert's key must
// be exactly the columns of the primary key or a unique index. Errors name
// the table and the column. A row the table rejects (a constraint, a
// value of the wrong type) fails the job with a [*RowError] naming the
// table, the column or constraint, the record's position (the writer's
// record count in this attempt), its event time and its values: a row is
// never dropped silently.
//
// # Exactly once
//
// With ExactlyOnce (the default) each writer subtask writes a checkpoint
// interval's rows in one transaction on a connection of its own and ends
// it at the checkpoint barrier with PREPARE TRANSACTION
// '<prefix><subtask>-<checkpoint>' (prefix "sluice-<job id>-<sink uid>-"
// by default, see [TransactionPrefix]). After the checkpoint completed the
// committer runs COMMIT PREPARED from a connection of its own. The
// committable carries the transaction id; a gid that is no longer prepared
// is judged by pg_xact_status: "committed" is a success (an earlier
// attempt committed it: commit is idempotent), "aborted" fails the job
// with [ErrRolledBack] (someone rolled it back; its rows are lost).
//
// A writer that starts terminates the sessions of the earlier attempts'
// writers it replaces (found by their application_name), whose open
// transactions would otherwise hold row locks for ever (a hung or
// abandoned process: PostgreSQL's equivalent of fencing a Kafka
// transactional id), then rolls back the prepared transactions of its job
// and sink that no completed checkpoint names, by the rule of package
// sink/leftover: on a fresh start every gid of old subtask j with
// j % parallelism == subtask; after a restore of checkpoint r those
// prepared after r (also of subtasks beyond a smaller new parallelism).
// Those up to r are restored committables, which the committer commits.
//
// The server needs max_prepared_transactions > 0 (at least the sink's
// parallelism, plus one per other prepared transaction); with 0 the
// writer fails at start with [ErrPreparedTransactionsDisabled].
//
// # Prepared transactions hold resources
//
// A prepared transaction keeps its locks (the rows it wrote, and a lock
// on the table that blocks ALTER TABLE, TRUNCATE, DROP) and keeps VACUUM
// from removing row versions newer than it, until it is committed or
// rolled back — also across a server restart. The sink holds one per
// subtask for about a checkpoint interval plus the time to complete the
// checkpoint. Watch the gauge [MetricOldestPreparedAge]; a job that is
// gone for good leaves its last prepared transactions behind: list them
// with SELECT gid, prepared FROM pg_prepared_xacts and ROLLBACK PREPARED
// them (a restart of the job from its checkpoint does that). A
// checkpoint that is aborted keeps its prepared transactions: with
// tolerable checkpoint failures the runtime commits them with the next
// completed checkpoint, and without, the job fails over and the new
// writers roll them back (NotifyCheckpointAborted rolling back would lose
// rows in the first case).
//
// Exactly-once Upsert sends a checkpoint interval's rows only at the
// checkpoint (they are buffered in memory): a row written while the
// previous checkpoint's transaction is prepared would wait for its row
// lock, and the commit that releases it is handed to the committer only
// by the subtask that is waiting. Exactly-once Append streams rows
// (COPY, BatchSize rows at a time) into the open transaction; a unique
// index that the next interval's rows conflict with makes them wait for
// the previous commit in the same way.
//
// # At least once
//
// With AtLeastOnce rows are autocommitted in batches of BatchSize and at
// every checkpoint; nothing is prepared, max_prepared_transactions may be
// 0. Append then writes rows again after a failure (duplicates), Upsert
// writes them to the same result.
package postgres
