package clicodec

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
)

// Codec encodes registry.Record values; it implements
// exchange.Codec[registry.Record]. It is safe for concurrent use.
type Codec struct {
	table []*registry.Codecs
}

// New returns a codec whose raw values may be in any of codecs (a
// source's codecs, in an order both nodes share). Entries may be nil.
func New(codecs ...*registry.Codecs) *Codec {
	return &Codec{table: codecs}
}

// Flag bits of a record's first byte.
const (
	formMask    = 0x03
	formNone    = 0 // no value (nil)
	formRaw     = 1 // undecoded bytes of a table codec
	formValue   = 2 // a decoded value
	formDead    = 3 // a dead letter
	flagChecked = 1 << 2
	flagMeta    = 1 << 3
	flagPos     = 1 << 4
	flagKey     = 1 << 5 // the metadata has a key (nil = none)
	flagTime    = 1 << 6 // the metadata has a timestamp
)

// Value tags.
const (
	tagNil = iota
	tagFalse
	tagTrue
	tagInt64
	tagFloat64
	tagString
	tagBytes
	tagNumber
	tagTime
	tagList
	tagObject
	tagInt
	tagInt32
	tagUint64
	tagFloat32
	tagBytesNil // a nil []byte
)

// maxDepth bounds the nesting of decoded values.
const maxDepth = 512

func identity(c format.Codec) string {
	if c == nil {
		return ""
	}
	return c.Identity()
}

// index returns the table index of the codecs that read b (value codec
// vc, key codec kc), -1 if none matches.
func (c *Codec) index(vc, kc format.Codec) int {
	vi := identity(vc)
	if vi == "" {
		return -1
	}
	ki := identity(kc)
	for i, e := range c.table {
		if e == nil || identity(e.Value) != vi {
			continue
		}
		// A key codec without an Identity matches only no key codec.
		if (kc == nil) == (e.Key == nil) && (kc == nil || ki != "" && identity(e.Key) == ki) {
			return i
		}
	}
	return -1
}

// Append appends r's encoding to dst.
func (c *Codec) Append(dst []byte, r registry.Record) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0)
	var flags byte
	if d, ok := registry.DeadLetterOf(r); ok {
		dst[start] = formDead
		return appendDeadLetter(dst, d)
	}
	raw, vc, hasRaw := r.Bytes()
	idx := -1
	if hasRaw {
		idx = c.index(vc, r.KeyCodec())
	}
	switch {
	case idx >= 0:
		flags = formRaw
		if r.Checked() {
			flags |= flagChecked
		}
		dst = binary.AppendUvarint(dst, uint64(idx))
		dst = appendBytes(dst, raw)
	default:
		if !r.Decoded() {
			var err error
			if r, err = r.Decode(context.Background()); err != nil {
				return dst[:start], fmt.Errorf("clicodec: the value's bytes are of a codec the edge's table lacks (%q), and do not decode: %w", identity(vc), err)
			}
		}
		v := r.Value()
		if v == nil {
			flags = formNone
			break
		}
		flags = formValue
		var err error
		if dst, err = appendValue(dst, v, 0); err != nil {
			return dst[:start], fmt.Errorf("clicodec: value: %w", err)
		}
	}
	m := r.Meta()
	if m.Key != nil || len(m.Headers) > 0 || !m.Timestamp.IsZero() || m.Topic != "" || m.Partition != 0 || m.Offset != 0 || m.Path != "" {
		flags |= flagMeta
		if m.Key != nil {
			flags |= flagKey
			dst = appendBytes(dst, m.Key)
		}
		if !m.Timestamp.IsZero() {
			flags |= flagTime
			dst = binary.AppendVarint(dst, m.Timestamp.UnixNano())
		}
		dst = binary.AppendUvarint(dst, uint64(len(m.Headers)))
		for _, h := range m.Headers {
			dst = appendString(dst, h.Key)
			dst = appendNullable(dst, h.Value)
		}
		dst = appendString(dst, m.Topic)
		dst = binary.AppendVarint(dst, int64(m.Partition))
		dst = binary.AppendVarint(dst, m.Offset)
		dst = appendString(dst, m.Path)
	}
	if p := r.Pos().Resolve(); p != nil {
		flags |= flagPos
		dst = appendString(dst, p.Split)
		dst = appendString(dst, p.File)
		dst = appendString(dst, p.Topic)
		dst = binary.AppendVarint(dst, int64(p.Partition))
		dst = binary.AppendVarint(dst, p.Offset)
	}
	dst[start] = flags
	return dst, nil
}

// Decode returns the record encoded in b. Raw values and byte strings
// refer to b.
func (c *Codec) Decode(b []byte) (registry.Record, error) {
	if len(b) == 0 {
		return registry.Record{}, errors.New("clicodec: empty record")
	}
	flags := b[0]
	d := decoder{b: b[1:]}
	var r registry.Record
	switch flags & formMask {
	case formNone:
		r = registry.NewRecord(nil)
	case formRaw:
		i := d.uvarint()
		raw := d.bytes()
		if d.err != nil {
			break
		}
		if i >= uint64(len(c.table)) || c.table[i] == nil {
			return r, fmt.Errorf("clicodec: raw value of codec %d, but the edge's table has %d codecs (do both nodes run the same pipeline?)", i, len(c.table))
		}
		r = registry.RawRecord(raw, c.table[i])
		if flags&flagChecked != 0 {
			r = r.WithRawValue(raw)
		}
	case formValue:
		v := d.value(0)
		r = registry.NewRecord(v)
	case formDead:
		dl := d.deadLetter()
		if d.err == nil && len(d.b) > 0 {
			d.err = fmt.Errorf("%d bytes after a dead letter", len(d.b))
		}
		if d.err != nil {
			return registry.Record{}, fmt.Errorf("clicodec: malformed dead letter: %w", d.err)
		}
		return registry.MarkDeadLetter(dl), nil
	}
	if flags&flagMeta != 0 {
		var m registry.Meta
		if flags&flagKey != 0 {
			m.Key = d.bytes()
			if m.Key == nil {
				m.Key = []byte{}
			}
		}
		if flags&flagTime != 0 {
			m.Timestamp = time.Unix(0, d.varint())
		}
		if n := d.count(2); n > 0 { // a header takes at least 2 bytes
			m.Headers = make([]registry.Header, n)
			for i := range m.Headers {
				m.Headers[i].Key = d.string()
				m.Headers[i].Value = d.nullable()
			}
		}
		m.Topic = d.string()
		m.Partition = d.int32()
		m.Offset = d.varint()
		m.Path = d.string()
		r = r.WithMeta(m)
	}
	if flags&flagPos != 0 {
		var p registry.Position
		p.Split = d.string()
		p.File = d.string()
		p.Topic = d.string()
		p.Partition = d.int32()
		p.Offset = d.varint()
		r = registry.WithPosition(r, p)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the record", len(d.b))
	}
	if d.err == nil && flags&^(formMask|flagChecked|flagMeta|flagPos|flagKey|flagTime) != 0 {
		d.err = fmt.Errorf("unknown flags %#x", flags)
	}
	if d.err != nil {
		return registry.Record{}, fmt.Errorf("clicodec: malformed record: %w", d.err)
	}
	return r, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendNullable appends b with its length plus one; 0 is nil.
func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(b))+1)
	return append(dst, b...)
}

func appendDeadLetter(b []byte, d *registry.DeadLetter) ([]byte, error) {
	b = appendString(b, d.Error)
	b = appendString(b, d.Operator)
	b = appendString(b, d.Split)
	b = appendString(b, d.File)
	b = binary.AppendVarint(b, d.Offset)
	if d.Raw == nil {
		b = append(b, 0)
	} else {
		b = appendBytes(append(b, 1), d.Raw)
	}
	b, err := appendValue(b, d.Input, 0)
	if err != nil {
		return b, fmt.Errorf("clicodec: dead letter input: %w", err)
	}
	return b, nil
}

// appendValue appends a tagged JSON-like value.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch v := v.(type) {
	case nil:
		return append(b, tagNil), nil
	case bool:
		if v {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt64), v), nil
	case int:
		return binary.AppendVarint(append(b, tagInt), int64(v)), nil
	case int32:
		return binary.AppendVarint(append(b, tagInt32), int64(v)), nil
	case uint64:
		return binary.AppendUvarint(append(b, tagUint64), v), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat64), math.Float64bits(v)), nil
	case float32:
		return binary.LittleEndian.AppendUint32(append(b, tagFloat32), math.Float32bits(v)), nil
	case string:
		return appendString(append(b, tagString), v), nil
	case []byte:
		if v == nil {
			return append(b, tagBytesNil), nil
		}
		return appendBytes(append(b, tagBytes), v), nil
	case json.Number:
		return appendString(append(b, tagNumber), string(v)), nil
	case time.Time:
		t, err := v.MarshalBinary()
		if err != nil {
			return b, err
		}
		return appendBytes(append(b, tagTime), t), nil
	case []any:
		b = binary.AppendUvarint(append(b, tagList), uint64(len(v)))
		for i, e := range v {
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return b, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return b, nil
	case map[string]any:
		b = binary.AppendUvarint(append(b, tagObject), uint64(len(v)))
		for k, e := range v {
			b = appendString(b, k)
			var err error
			if b, err = appendValue(b, e, depth+1); err != nil {
				return b, fmt.Errorf(".%s: %w", k, err)
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("a value of type %T cannot cross nodes", v)
}

// decoder reads an encoded record; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int32() int32 {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail(fmt.Errorf("%d is not an int32", v))
		return 0
	}
	return int32(v)
}

// count reads a length of items that take at least min bytes each.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)/min) {
		d.fail(fmt.Errorf("count %d exceeds the record", n))
		return 0
	}
	return int(n)
}

func (d *decoder) raw(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte { return d.raw(d.uvarint()) }

func (d *decoder) nullable() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	return d.raw(n - 1)
}

func (d *decoder) string() string { return string(d.bytes()) }

func (d *decoder) fixed(n int) []byte { return d.raw(uint64(n)) }

func (d *decoder) value(depth int) any {
	if d.err != nil {
		return nil
	}
	if depth > maxDepth {
		d.fail(fmt.Errorf("nested deeper than %d", maxDepth))
		return nil
	}
	if len(d.b) == 0 {
		d.fail(errTruncated)
		return nil
	}
	tag := d.b[0]
	d.b = d.b[1:]
	switch tag {
	case tagNil:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagInt64:
		return d.varint()
	case tagInt:
		return int(d.varint())
	case tagInt32:
		return d.int32()
	case tagUint64:
		return d.uvarint()
	case tagFloat64:
		if b := d.fixed(8); b != nil {
			return math.Float64frombits(binary.LittleEndian.Uint64(b))
		}
		return nil
	case tagFloat32:
		if b := d.fixed(4); b != nil {
			return math.Float32frombits(binary.LittleEndian.Uint32(b))
		}
		return nil
	case tagString:
		return d.string()
	case tagBytes:
		b := d.bytes()
		if b == nil && d.err == nil {
			b = []byte{}
		}
		return b
	case tagBytesNil:
		return []byte(nil)
	case tagNumber:
		return json.Number(d.string())
	case tagTime:
		var t time.Time
		if b := d.bytes(); d.err == nil {
			if err := t.UnmarshalBinary(b); err != nil {
				d.fail(fmt.Errorf("time: %w", err))
			}
		}
		return t
	case tagList:
		n := d.count(1)
		l := make([]any, n)
		for i := range l {
			l[i] = d.value(depth + 1)
		}
		return l
	case tagObject:
		n := d.count(2)
		m := make(map[string]any, n)
		for range n {
			k := d.string()
			m[k] = d.value(depth + 1)
		}
		return m
	}
	d.fail(fmt.Errorf("unknown value tag %d", tag))
	return nil
}

func (d *decoder) deadLetter() *registry.DeadLetter {
	dl := &registry.DeadLetter{}
	dl.Error = d.string()
	dl.Operator = d.string()
	dl.Split = d.string()
	dl.File = d.string()
	dl.Offset = d.varint()
	if f := d.fixed(1); f != nil && f[0] == 1 {
		dl.Raw = d.bytes()
		if dl.Raw == nil && d.err == nil {
			dl.Raw = []byte{}
		}
	}
	dl.Input = d.value(0)
	return dl
}
