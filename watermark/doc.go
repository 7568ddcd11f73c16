// Package watermark holds event-time strategies and the arithmetic of
// watermarks.
//
// A [Strategy] assigns event timestamps to records and makes one
// [Generator] per split: [Monotonous] for ordered timestamps,
// [BoundedOutOfOrderness] for records that arrive up to a fixed delay late,
// and [Strategy.WithIdleness] so that a split without data does not hold the
// watermark back. A [Combiner] takes the minimum over a reader's splits or
// an operator's inputs, leaving idle ones out.
//
// Timestamps and watermarks are int64 milliseconds since the epoch, as in
// Flink; [Min] means "no watermark yet" and [Max] "end of input".
//
// # Watermark alignment
//
// [Strategy.WithWatermarkAlignment] (Flink's FLIP-182 and FLIP-217) keeps
// the sources of one alignment group within a maximum drift of each other,
// so that a fast source — or a fast split — does not read far ahead of a
// slow one and fill downstream state with records that wait for the slow
// side's watermark.
//
// Every source subtask of the group reports its current watermark: the
// minimum over its splits, as emitted downstream; the maximum watermark
// while all of its splits are idle or its input ended, so that it does not
// hold the group back; nothing before it has a watermark. The group's
// maximum allowed watermark is the minimum over the reports plus the
// maximum drift. A subtask whose watermark is beyond it stops polling its
// reader, and a reader that holds several splits has each split whose own
// watermark is beyond it paused through source.SplitPauser; both resume
// when the group has caught up. A paused subtask still takes part in
// checkpoints, and a paused split is never declared idle for lack of
// records.
//
// In the local runtime a subtask publishes its report as its watermark
// changes and re-reads the group's bound then and at least every update
// interval (default [DefaultAlignmentUpdateInterval], rounded up to the
// job's watermark interval), which is how often a paused subtask or split
// notices that it may go on. How far a split can get beyond the bound
// depends on how often its watermark moves: with watermarks from a
// Generator, by what it reads in one watermark interval; with watermarks
// the reader emits itself after each batch, by one batch (plus what a
// reader has already fetched when it is paused).
//
// A reader that holds several splits but does not implement
// source.SplitPauser fails the job, unless unaligned source splits are
// allowed ([Strategy.WithUnalignedSourceSplits], or the job-wide option of
// package stream); then it is aligned per subtask only. The metric
// watermarkAlignmentDrift of each source subtask is its watermark minus the
// group's minimum.
package watermark
