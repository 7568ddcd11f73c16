package registry

import (
	"context"
	"time"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is the record of CLI pipelines: a value plus metadata, passed by
// value. The value is JSON-like (see package format) and may still be
// undecoded: a source that reads bytes keeps them with the codec that
// decodes them, and decodes only when a transform or sink needs the value
// (Decode). A sink whose codec reads the same bytes as the record's
// (format.Codec Identity) writes them unchanged.
//
// Metadata is referenced, not copied: a record a Kafka source read points
// at the fetched *kgo.Record (key, headers, timestamp, topic, partition,
// offset); other metadata (a file's path and offset, or metadata a With…
// setter replaced) is in a *Meta. The zero Record has a nil value and no
// metadata.
type Record struct {
	val    any     // the decoded value; undecoded (sentinel) while only raw is known; a *DeadLetter marks a dead letter
	raw    []byte  // the value's bytes as read, while unchanged (hasRaw)
	src    *Codecs // the codecs raw and the Kafka key were read with; nil = none
	kr     *kgo.Record
	meta   *Meta
	pos    PosRef
	hasRaw bool // raw is the value's bytes
	// checked: raw decodes without error (the source checked it, or a
	// transform built it), so a reader may scan it without checking.
	checked bool
	// nfound > 0: the source found the members src.Lookup names while
	// checking raw (Found): found[3i:3i+3] is where the value of
	// src.Lookup[i] is in raw, its start (2 bytes, little-endian) and
	// length (1 byte); all 0 when absent. (Three bytes a member keep the
	// Record within 96 bytes.)
	nfound uint8
	found  [3 * maxFound]byte
}

// maxFound is how many members a source finds for a record (Found): in
// values of less than 64 KiB, members of at most 255 bytes.
const maxFound = 4

// Codecs are the formats a source reads values and keys with. A source
// makes one and shares it by pointer with every record it reads.
type Codecs struct {
	Value format.Codec // decodes a record's value bytes
	Key   format.Codec // decodes a Kafka key for meta.key; nil = as a string
	// Lookup are the top-level members of JSON object values a source
	// that checks values finds in the same scan (BuildContext.LookupKeys,
	// Record.Found); nil = none.
	Lookup []string
}

// Found sets vals[i] to the bytes of the value of keys[i] in the record's
// value (nil when absent) and reports true when its source found them
// while checking its bytes: keys is its Codecs.Lookup (the same slice)
// and the value is the bytes it checked. Otherwise it reports false and
// vals are unchanged.
func (r Record) Found(keys []string, vals [][]byte) bool {
	if r.nfound == 0 || !r.hasRaw || r.src == nil || int(r.nfound) != len(keys) || len(vals) != len(keys) ||
		len(r.src.Lookup) != len(keys) || &r.src.Lookup[0] != &keys[0] {
		return false
	}
	for i := range vals {
		f := r.found[3*i : 3*i+3]
		start := int(f[0]) | int(f[1])<<8
		if start == 0 { // a member's value never starts at 0
			vals[i] = nil
			continue
		}
		end := start + int(f[2])
		vals[i] = r.raw[start:end:end]
	}
	return true
}

// setFound records where the members were found in r.raw (spans[i]:
// LookupSpans'), if they fit.
func (r *Record) setFound(spans [][2]int) {
	if len(spans) == 0 || len(spans) > maxFound || len(r.raw) >= 1<<16 {
		return
	}
	for i, sp := range spans {
		n := sp[1] - sp[0]
		if n > 255 {
			return
		}
		r.found[3*i], r.found[3*i+1], r.found[3*i+2] = byte(sp[0]), byte(sp[0]>>8), byte(n) // all 0 when absent
	}
	r.nfound = uint8(len(spans))
}

// Header is a Kafka record header.
type Header = kgo.RecordHeader

// Meta is a record's metadata that is not a Kafka record's own: a file
// source's path and line offset, or metadata set with a With… setter.
type Meta struct {
	Key       []byte // nil = no key
	Headers   []Header
	Timestamp time.Time // zero = none
	Topic     string
	Partition int32
	Offset    int64 // Kafka offset, or the byte offset of a file's line
	Path      string
}

// undecodedT marks a record whose value is known only as bytes.
type undecodedT struct{}

var undecoded any = &undecodedT{}

// NewRecord returns a record with value v and no metadata.
func NewRecord(v any) Record { return Record{val: v} }

// RawRecord returns a record whose value is b, to be decoded with
// c.Value when needed. b is referenced, not copied: it must not change.
// It does not allocate.
func RawRecord(b []byte, c *Codecs) Record {
	return Record{val: undecoded, raw: b, src: c, hasRaw: true}
}

// KafkaRecord returns a record read from rec: its value rec.Value
// decoded with c.Value when needed, its metadata rec's (by reference:
// rec must not be reused), and rec as its position. It does not allocate.
func KafkaRecord(rec *kgo.Record, c *Codecs) Record {
	return Record{val: undecoded, raw: rec.Value, src: c, kr: rec, pos: PosRef{rec}, hasRaw: true}
}

// Decoded reports whether the value is decoded (Value is meaningful).
func (r Record) Decoded() bool { return r.val != undecoded }

// Decode returns r with its value decoded from its bytes; r itself when
// it is decoded already. The bytes stay (for pass-through) until a setter
// replaces the value.
func (r Record) Decode(ctx context.Context) (Record, error) {
	if r.val != undecoded {
		return r, nil
	}
	v, err := r.src.Value.Decode(ctx, r.Topic(), r.raw)
	if err != nil {
		return r, err
	}
	r.val = v
	return r, nil
}

// Value returns the decoded value; nil while the record is not decoded
// (see Decode) or for a dead letter.
func (r Record) Value() any {
	if r.val == undecoded {
		return nil
	}
	if _, ok := r.val.(*DeadLetter); ok {
		return nil
	}
	return r.val
}

// Object returns the value as an object, if it is one.
func (r Record) Object() (map[string]any, bool) {
	m, ok := r.val.(map[string]any)
	return m, ok
}

// Bytes returns the value's bytes as read and the codec they are in,
// while the value is unchanged (ok false after WithValue, or for a record
// made by NewRecord).
func (r Record) Bytes() (b []byte, c format.Codec, ok bool) {
	if !r.hasRaw {
		return nil, nil, false
	}
	return r.raw, r.src.Value, true
}

// WithValue returns r with value v: its bytes are dropped, its metadata
// and position kept.
func (r Record) WithValue(v any) Record {
	r.val, r.raw, r.hasRaw, r.checked, r.nfound = v, nil, false, false, 0
	return r
}

// WithRawValue returns r with b as its value's new bytes, in the codec
// r's bytes were in (r must have bytes: see Bytes): undecoded, with r's
// metadata and position. A transform that rewrote part of r's bytes
// returns its result so; b is referenced, not copied. b must decode
// without error in that codec: the record is Checked.
func (r Record) WithRawValue(b []byte) Record {
	r.val, r.raw, r.hasRaw, r.checked, r.nfound = undecoded, b, true, true, 0
	return r
}

// Checked reports whether the record's bytes (Bytes) are known to decode
// without error: the source checked them with its codec (a source that
// emits values undecoded, see BuildContext.DecodeValues), or a transform
// built them (WithRawValue). A reader of checked bytes may scan them
// without checking them again.
func (r Record) Checked() bool { return r.hasRaw && r.checked }

// withEncoded returns r with b, the value already encoded by a sink's
// step, as its bytes in codec c (preEncoded): the sink writes them as
// they are. Metadata and position are kept.
func (r Record) withEncoded(b []byte, c *Codecs) Record {
	r.val, r.raw, r.src, r.hasRaw, r.checked, r.nfound = undecoded, b, c, true, false, 0
	return r
}

// KeyCodec returns the codec the record's key was read with (nil = read
// it as a string).
func (r Record) KeyCodec() format.Codec {
	if r.src == nil {
		return nil
	}
	return r.src.Key
}

// Key returns the record's key; nil when it has none.
func (r Record) Key() []byte {
	switch {
	case r.kr != nil:
		return r.kr.Key
	case r.meta != nil:
		return r.meta.Key
	}
	return nil
}

// Headers returns the record's headers (shared: do not change them).
func (r Record) Headers() []Header {
	switch {
	case r.kr != nil:
		return r.kr.Headers
	case r.meta != nil:
		return r.meta.Headers
	}
	return nil
}

// Timestamp returns the record's timestamp; the zero time when it has
// none.
func (r Record) Timestamp() time.Time {
	switch {
	case r.kr != nil:
		return r.kr.Timestamp
	case r.meta != nil:
		return r.meta.Timestamp
	}
	return time.Time{}
}

// Topic returns the Kafka topic the record was read from ("" if none).
func (r Record) Topic() string {
	switch {
	case r.kr != nil:
		return r.kr.Topic
	case r.meta != nil:
		return r.meta.Topic
	}
	return ""
}

// Partition returns the Kafka partition the record was read from.
func (r Record) Partition() int32 {
	switch {
	case r.kr != nil:
		return r.kr.Partition
	case r.meta != nil:
		return r.meta.Partition
	}
	return 0
}

// Offset returns the Kafka offset, or the byte offset of a file's line,
// the record was read at.
func (r Record) Offset() int64 {
	switch {
	case r.kr != nil:
		return r.kr.Offset
	case r.meta != nil:
		return r.meta.Offset
	}
	if p, ok := r.pos.v.(*Position); ok {
		return p.Offset
	}
	return 0
}

// Path returns the file the record was read from ("" if none).
func (r Record) Path() string {
	if r.meta != nil {
		return r.meta.Path
	}
	if p, ok := r.pos.v.(*Position); ok {
		return p.File
	}
	return ""
}

// Meta returns a copy of the record's metadata.
func (r Record) Meta() Meta {
	switch {
	case r.kr != nil:
		return Meta{Key: r.kr.Key, Headers: r.kr.Headers, Timestamp: r.kr.Timestamp, Topic: r.kr.Topic,
			Partition: r.kr.Partition, Offset: r.kr.Offset}
	case r.meta != nil:
		return *r.meta
	}
	return Meta{Path: r.Path(), Offset: r.Offset()}
}

// WithMeta returns r with metadata m (the Kafka record it was read from,
// if any, is no longer consulted for metadata; it stays its position).
func (r Record) WithMeta(m Meta) Record {
	r.kr, r.meta = nil, &m
	return r
}

// WithKey returns r with key k (nil = none).
func (r Record) WithKey(k []byte) Record {
	m := r.Meta()
	m.Key = k
	return r.WithMeta(m)
}

// WithHeaders returns r with headers h.
func (r Record) WithHeaders(h []Header) Record {
	m := r.Meta()
	m.Headers = h
	return r.WithMeta(m)
}

// WithTimestamp returns r with timestamp t.
func (r Record) WithTimestamp(t time.Time) Record {
	m := r.Meta()
	m.Timestamp = t
	return r.WithMeta(m)
}

// Pos returns where the source read the record (the zero PosRef if it
// did not say).
func (r Record) Pos() PosRef { return r.pos }

// WithPos returns r carrying position p.
func (r Record) WithPos(p PosRef) Record {
	r.pos = p
	return r
}
