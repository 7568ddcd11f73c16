// Package hive is sluice's Hive Metastore connector: the "metastore"
// partition commit policy of the file sink (Flink's
// sink.partition-commit.policy.kind=metastore). When the file sink
// declares a Hive-style partition directory ("dt=2026-11-30/hr=13")
// complete, the committer from [NewPartitionCommitter] adds it to a
// partitioned table of a Hive Metastore, so Hive, Spark, Trino and other
// engines see it.
//
// It speaks the metastore's Thrift API (binary protocol, buffered
// transport, no SASL or Kerberos) through github.com/apache/thrift and the
// generated bindings of github.com/beltran/gohive/hive_metastore. [Client]
// holds one connection, reopened when it is lost; every call is bounded by
// [CallTimeout] and retried while the metastore is unreachable, up to
// [RetryTimeout] (default 2m), with a jittered [Backoff]. Errors that the
// metastore answered with (no such table, invalid partition) are not
// retried.
//
// # Exactly once
//
// A partition commit is idempotent: adding a partition that exists with
// the same location succeeds, and one with another location is moved
// there (alter_partition). So a commit that is repeated after a failure —
// the file sink commits a partition again when the job restarts from a
// checkpoint taken before the commit completed — leaves the table with the
// partition once. An add that reached the metastore just before the
// connection broke is seen on the retry as "already exists".
//
// # Tables
//
// The table must exist and be partitioned by the sink's partition names
// (matched case-insensitively, in directory order; [WithPartitionKeys]
// checks them when the committer is made, otherwise the first commit
// does). Each partition's storage descriptor is the table's (formats,
// serde, columns) with the partition's location. [Client.CreateExternalTable]
// creates such a table for the formats the file sink writes ([JSONLines],
// [Parquet]); the committer never creates tables.
package hive
