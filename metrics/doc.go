// Package metrics is sluice's small metrics interface and an in-memory
// registry behind it.
//
// Metric names follow Flink's standard connector metrics (FLIP-33):
// numRecordsIn, numRecordsOut, numBytesIn, numRecordsInErrors,
// pendingRecords, currentEmitEventTimeLag, currentOutputWatermark, the sink's
// numRecordsSend, and the checkpoint statistics numberOfCompletedCheckpoints,
// lastCheckpointDuration and lastCheckpointSize. The constants below spell
// them.
//
// Metrics are scoped: a [Group] carries labels (job, operator, subtask, …)
// and hands out counters and gauges. Counters are atomic and cheap, but the
// runtime still adds to them once per batch, not once per record, to keep
// them off the hot path. Export (Prometheus text format, JSON status) is
// built on [Registry.Snapshot].
package metrics
