// Package clicodec encodes the records of CLI pipelines
// (registry.Record) for edges that cross nodes: an exchange.Codec with a
// compact binary form.
//
// A record is one flags byte, then its value, metadata and position,
// each present only when the record has it:
//
//	flags      value form (2 bits) | checked | metadata | position | key | timestamp
//	value      raw:      codec index, length, the value's bytes as read (still undecoded on the other side)
//	           decoded:  a tagged value (nil, bool, int64, float64, string, bytes, json.Number,
//	                     time, list, object, and int, int32, uint64, float32 as they are)
//	           dead letter: error, operator, split, file, offset, raw bytes, input value
//	metadata   key, headers, timestamp (Unix nanoseconds), topic, partition, offset, path
//	position   split, file, topic, partition, offset
//
// Integers are varints; strings and byte strings are length-prefixed.
// A record whose value is still the bytes a source read travels as those
// bytes with the index of their codec in the table given to [New] — both
// nodes build it from the same pipeline, in the same order — so a
// pass-through pipeline never decodes across the wire. Codecs match by
// format.Codec Identity (value and key codec); bytes of a codec not in
// the table, or of one without an Identity, are decoded and sent as a
// value.
//
// On the receiving side metadata is attached with WithMeta (a Kafka
// record's metadata as a copy, not the *kgo.Record) and positions with
// registry.WithPosition; every getter returns what it returned on the
// sending side.
package clicodec
