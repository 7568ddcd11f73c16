package file

import "context"

// Partition is one partition directory of a sink with Hive-style buckets
// ([HivePartitionsOf]) that a partition commit declares complete.
type Partition struct {
	// Path is the bucket path relative to the sink's base directory, for
	// example "dt=2026-11-30/hr=13".
	Path string
	// Location is the partition directory's full path, or its URL for a
	// sink on an object store ("s3://bucket/table/dt=2026-11-30/hr=13").
	Location string
	// Values are the partition's name=value pairs in directory order,
	// unescaped as Hive unescapes them.
	Values []PartitionValue
}

// PartitionValue is one level of a [Partition]: the directory
// "dt=2026-11-30" is {Name: "dt", Value: "2026-11-30"}.
type PartitionValue struct {
	Name, Value string
}

// PartitionCommitter is a partition commit policy (Flink's
// sink.partition-commit.policy.kind): it is told that a partition is
// complete — no more records will be written to it — once the checkpoint
// that made the partition's last files visible completed and the commit
// trigger fired for it. Writing a _SUCCESS file and adding the partition
// to a Hive Metastore are policies.
//
// A policy must be idempotent: after a failure the same partition can be
// committed again.
type PartitionCommitter interface {
	CommitPartition(ctx context.Context, p Partition) error
}
