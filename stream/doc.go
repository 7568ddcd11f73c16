// Package stream is the typed API for building and running sluice jobs.
//
// A job starts at one or more sources, transforms records with Map, Filter
// and FlatMap, and ends at sinks:
//
//	env := stream.New(stream.Parallelism(4), stream.CheckpointEvery(time.Second))
//	orders := stream.FromSource(env, src, watermark.BoundedOutOfOrderness[Order](5*time.Second), "orders")
//	large := stream.Filter(orders, func(o Order) bool { return o.Amount > 100 }, stream.Name("large"))
//	stream.SinkTo(stream.Map(large, enrich, stream.Name("enrich")), snk, "files")
//	result, err := env.Execute(ctx, "orders-to-files")
//
// Operators connected one-to-one with the same parallelism are chained into
// one task and call each other directly, a batch at a time. [Rebalance] and
// [KeyBy] put an exchange between tasks: records travel in batches over
// bounded channels, so a slow consumer slows its producers (backpressure).
// A job spread over several processes ([Placement] with a [Network])
// places its forward chains on them, and the channels of a KeyBy or
// Rebalance between processes go over gRPC with credit-based flow
// control; such an edge needs a codec ([EdgeCodec], [EdgeCodecFuncs]).
//
// With checkpointing on, the runtime takes aligned checkpoints: sources
// snapshot their splits, two-phase sinks prepare, and committers commit
// once the checkpoint is stored. A failure restarts the job from the latest
// completed checkpoint per its restart strategy; sources rewind and sinks
// abort what was prepared but not committed, so output equals input.
//
// Operator names label metrics and logs; state is keyed by the operator's
// uid ([UID], Flink's uid), which defaults to the name. Give every operator
// a unique name (the source and sink take one as an argument, other
// operators through [Name]), and give a renamed operator its old name as
// [UID]. Restoring a snapshot with state that matches no uid fails unless
// [AllowNonRestoredState] is set.
//
// With [CheckpointDir] a run holds an exclusive lock on the directory and
// records the job id there (checkpoint.Local); checkpoint.LoadLatest loads
// a directory's newest completed checkpoint for [RestoreFrom], refusing
// rather than falling back past a damaged one.
package stream
