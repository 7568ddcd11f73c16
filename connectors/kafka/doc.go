// Package kafka is sluice's Apache Kafka connector: a split-based source
// (one split per partition) and a sink with none, at-least-once and
// exactly-once delivery, built on franz-go.
//
// # Source
//
// [NewSource] subscribes to a topic list ([Topics]), a pattern
// ([TopicPattern]) or explicit partitions ([Partitions]). The enumerator
// discovers partitions off the coordinator goroutine, resolves their start
// (and, bounded, stop) offsets to numbers, and pushes each partition to
// reader (hash(topic) + partition) % parallelism. Partitions found later by
// periodic discovery ([PartitionDiscovery]) start at the earliest offset.
// Readers are [readerbase] readers with one franz-go client each, consuming
// their partitions directly (no group membership); records are read
// read_committed by default, control records only advance the position, and
// each partition gets its own watermark generator (Output.ForSplit).
//
// A split carries its next offset, so recovery uses checkpoint state only.
// With a [GroupID], the positions of a checkpoint are also committed to that
// group once every sink of the job committed the checkpoint's output
// ([source.CommitListener]; the final one of a stop or of the end
// of input before the source closes): a fresh start with [Committed]
// continues there; a restore uses its checkpoint. A record the
// [Deserializer] rejects fails the job with an error naming topic,
// partition and offset (wrapping [ErrMalformedRecord]) or, with
// [SkipOnError], is counted in numRecordsInErrors and logged with its
// position at most once per 10 s per reader. Readers export the
// gauges currentOffset, committedOffset and pendingRecords per partition
// and the counter numBytesIn.
//
// # Sink
//
// [NewSink] with [ExactlyOnce] writes each subtask's checkpoint interval in
// one Kafka transaction. Transactional ids are "<prefix>-<subtask>-<slot>"
// for a small fixed pool of slots per subtask ([TransactionSlots]); a slot
// is reused once its transaction is committed, so the broker does not
// accumulate an id per checkpoint. At a checkpoint the writer flushes and
// returns a committable (transactional id, producer id, epoch); the
// committer commits it with a raw EndTxn request from its own client after
// the checkpoint completes, and a repeated commit is answered as a retry
// (already committed is a success). Committers tell writers in the same
// process which transactions they committed, and the writer's producer
// confirms that commit before its slot starts a new transaction, so
// producers are reused rather than created per checkpoint.
//
// On start and recovery a writer first commits the prepared transactions
// listed in its restored state (they belong to a completed checkpoint),
// then fences every transactional id it is responsible for with
// InitProducerID, which aborts what a failed attempt left open; ids of this
// prefix from a higher earlier parallelism or a larger pool are found with
// ListTransactions. The transaction timeout is checked against the broker's
// transaction.max.timeout.ms at start, and a writer warns (once per sink)
// when it is shorter than the job's checkpoint interval plus
// [RestartAllowance] (default 1m).
//
// The default prefix is "sluice-<job id>-<sink name>"
// ([DefaultTransactionalIDPrefix]). A writer holds a lease on its prefix
// (the group named by [LeaseGroup]) and refuses to start while another
// live sink holds it ([ErrPrefixInUse]); a producer fenced by someone
// else fails the job without restarts ([ErrFenced]). Records get no
// delivery timeout of their own (franz-go counts it from the record
// timestamp, which is the input's event time): FlushTimeout and the
// transaction timeout bound delivery. verdict.go says what a restore can
// and cannot learn from the broker about a transaction it cannot commit.
//
// Every writer checks at start that the [DefaultTopic] exists: a missing
// one fails the job without restarts ([*TopicNotFoundError]) unless
// [CreateTopic] lets the writer create it (racing creators all succeed).
// [ProducerCompression], [ProducerAcks] (None and AtLeastOnce only) and
// [RecordPartitioner] set the producer.
//
// Enumerator failures found off the coordinator (a missing topic at the
// first discovery, offsets that cannot be resolved) fail the job through
// EnumeratorContext.FailJob.
//
// # Unreachable brokers
//
// Every client of a writer, a reader and of discovery reports its
// connection attempts (franz-go hooks): a broker that cannot be reached is
// logged at once (WARN, host:port and node), again at most every 10s with
// how long it has been down, and when it is back. Once no broker could be
// reached for the connect timeout ([SinkConnectTimeout],
// [SourceConnectTimeout], default 30s), the blocking call fails with an
// [*UnreachableError] (ErrBrokersUnreachable) and the job restarts as its
// strategy says.
//
// # Security
//
// [TLS], [SASLPlain] and [SASLScram] configure the clients. A request the
// broker's ACLs refuse is not retried: it fails the job with an
// [*AuthorizationError] (matching [ErrNotAuthorized] and the broker's kerr
// error) that names the principal, the topic, transactional id, group or
// cluster, and the ACL operation; the README lists the ACLs each side
// needs.
//
// A connection the security settings cannot make (SASL authentication
// failed, an untrusted broker certificate, TLS to a plaintext listener)
// fails the job at once with a [*SecurityError], matching [ErrSecurity]
// and restart.ErrUnrecoverable, that names the brokers and the cause.
//
// This protocol is tested against kfake and against Apache Kafka 4.x (whose
// KIP-890 transactions bump the producer epoch at every commit) when
// SLUICE_KAFKA_BROKERS names a broker; scripts/kafka.sh runs one, and with
// start-secure a second one with TLS, SASL and ACLs (SLUICE_KAFKA_SECURE).
package kafka
