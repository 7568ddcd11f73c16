// Package serde holds versioned serializers, the equivalent of Flink's
// SimpleVersionedSerializer.
//
// Everything sluice persists in a checkpoint — splits, enumerator state,
// writer state, committables — goes through a [Versioned] serializer. The
// version is stored next to the bytes, so that a newer serializer can still
// read state written by an older one: old versions stay readable forever.
//
// [Marshal] and [Unmarshal] frame a value with its version; [JSON] is a
// ready-made serializer for plain Go values.
package serde
