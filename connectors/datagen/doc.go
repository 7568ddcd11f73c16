// Package datagen is a deterministic data generator source, Flink's
// DataGeneratorSource and NumberSequenceSource in one.
//
// Record k of a [Source] is gen(k) for the indexes k = 0, 1, 2, …: a bounded
// source ([Count]) emits the indexes 0 … Count-1, an unbounded one (the
// default) emits indexes forever. The indexes are divided into a fixed
// number of splits ([Splits], default 1, independent of the parallelism);
// see [Split] for the layout and [Source.SplitOf] for the split of an index.
// Each split emits its indexes in increasing order, so a test can check
// exactly-once delivery as "every index once, in order per split".
//
// Splits are pulled by default: a reader asks for one when it starts and
// each time it finishes one; the splits of an unbounded source never
// finish, so there a reader asks again each time it gets one (it keeps one
// request open), and every split is read whatever the parallelism. With [PushAssignment] the enumerator hands split
// i to subtask i%parallelism as soon as that reader registers. A bounded
// source tells every reader when no split is left, so readers without splits
// finish; an unbounded source keeps such readers idle (they mark their output
// idle) rather than finishing them.
//
// Readers are pure CPU and fast: each PollNext emits up to [BatchSize]
// records from one split, through that split's Output.ForSplit output so
// that per-split watermarks work, and the readers of a subtask take turns
// between their splits. [RatePerSecond] throttles the whole source with a
// token bucket per reader. [Timestamps] attaches event timestamps. Readers
// implement [source.SplitPauser], so watermark alignment can pause a split
// that runs ahead of the others.
//
// Split and enumerator state are serialized as JSON, version 1.
package datagen
