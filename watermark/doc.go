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
package watermark
