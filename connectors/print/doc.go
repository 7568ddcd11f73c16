// Package print is a sink that prints every record as a line of text,
// Flink's PrintSink, for examples and debugging.
//
// A line is the record formatted with fmt's %v, after a prefix like
// Flink's: "<prefix>:<subtask+1>> " with a prefix and parallelism above 1,
// "<subtask+1>> " without a prefix, "<prefix>> " with parallelism 1, and
// nothing at all with neither.
//
// The sink gives at-least-once delivery at best: lines are written as
// records arrive and are never taken back.
package print
