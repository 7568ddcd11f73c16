// Package postgres is sluice's PostgreSQL connector (on
// github.com/jackc/pgx/v5). This first slice is the sink: rows into one
// table, appended with COPY or upserted with INSERT … ON CONFLICT (key)
// DO UPDATE, exactly once with prepared transactions or at least once.
// Flink names: JdbcSink.exactlyOnceSink → [NewSink] with ExactlyOnce,
// JdbcSink.sink with an upsert dialect → WriteMode(Upsert).
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
