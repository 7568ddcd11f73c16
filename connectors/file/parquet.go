package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	pqcompress "github.com/parquet-go/parquet-go/compress"
)

// ParquetOption configures [ParquetBulk].
type ParquetOption interface{ applyParquet(*parquetConfig) }

type parquetOptionFunc func(*parquetConfig)

func (f parquetOptionFunc) applyParquet(c *parquetConfig) { f(c) }

type parquetConfig struct {
	codec        pqcompress.Codec
	rowGroupSize int64
	errs         []error
}

// ParquetCompression sets the page compression of [ParquetBulk]:
// "uncompressed", "snappy", "gzip", "zstd" or "lz4" (LZ4_RAW); the default
// is "snappy", the default of Flink's and Spark's parquet writers.
func ParquetCompression(name string) ParquetOption {
	return parquetOptionFunc(func(c *parquetConfig) {
		switch name {
		case "uncompressed", "none":
			c.codec = &parquet.Uncompressed
		case "snappy":
			c.codec = &parquet.Snappy
		case "gzip":
			c.codec = &parquet.Gzip
		case "zstd":
			c.codec = &parquet.Zstd
		case "lz4":
			c.codec = &parquet.Lz4Raw
		default:
			c.errs = append(c.errs, fmt.Errorf("%w: ParquetCompression %q: want uncompressed, snappy, gzip, zstd or lz4", ErrInvalidConfig, name))
		}
	})
}

// ParquetRowGroupSize sets the size of the values (uncompressed, as
// written) at which [ParquetBulk] ends a row group (default 128 MiB,
// parquet-java's parquet.block.size). A part file's last row group ends
// when the file is finished. The writer holds a row group's pages in
// memory until it ends, so a part file grows by whole row groups: a
// rolling policy by size (DefaultRollingPolicy.PartSize) sees the file
// reach its size only when a row group ends; keep the row group size well
// below the part size for part files near it.
func ParquetRowGroupSize(n int64) ParquetOption {
	return parquetOptionFunc(func(c *parquetConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("%w: ParquetRowGroupSize %d, must be at least 1", ErrInvalidConfig, n))
			return
		}
		c.rowGroupSize = n
	})
}

// ParquetBulk is the bulk format of Parquet files for map[string]any
// records in the value contract (see [AvroFile]); every part file is one
// Parquet file. Give the sink PartSuffix(".parquet").
//
// The schema is an Avro record schema (JSON), so that one schema language
// describes every format. Avro types map to Parquet types as Flink's and
// parquet-avro's writers map them:
//
//	boolean → BOOLEAN                   int → INT32; long → INT64
//	float → FLOAT; double → DOUBLE      string, enum, uuid → BYTE_ARRAY (STRING)
//	bytes → BYTE_ARRAY                  fixed(n) → FIXED_LEN_BYTE_ARRAY(n)
//	timestamp-millis/micros → INT64 TIMESTAMP(MILLIS/MICROS, UTC); local- ones too
//	date → INT32 DATE                   time-millis → INT32 TIME(MILLIS); time-micros → INT64 TIME(MICROS)
//	decimal(p,s) → DECIMAL(p,s): INT32 for p ≤ 9, INT64 for p ≤ 18, else FIXED_LEN_BYTE_ARRAY
//	["null", T] → optional T            array → LIST; map → MAP (string keys)
//	record → group
//
// Other unions are not supported (an error naming the field). Columns of
// a group are ordered by name (parquet-go's rule). Values are coerced
// as [AvroBulk] coerces them, with errors naming the field; a missing
// field takes the schema's default, or is null if the column is
// optional, else fails naming it.
//
// The writer writes columns directly: a record's values are appended to
// their columns (a flat record's fields converted in place, a nested one
// shredded, Dremel's way), and every 1024 records each column's values go
// to parquet-go's column writer in one call (a flat schema's required
// boolean, long, timestamp and double columns as typed arrays, straight
// into the column's buffer).
//
// Options: [ParquetCompression] (default snappy), [ParquetRowGroupSize]
// (default 128 MiB). An invalid schema or option is reported by Err at
// once and fails the sink's first NewWriter, with an error wrapping
// [ErrInvalidConfig].
func ParquetBulk(schema string, opts ...ParquetOption) *ParquetBulkFormat {
	c := parquetConfig{codec: &parquet.Snappy, rowGroupSize: 128 << 20}
	for _, o := range opts {
		o.applyParquet(&c)
	}
	b := &ParquetBulkFormat{cfg: c}
	s, err := parseAvroSchema(schema)
	switch {
	case err != nil:
		c.errs = append(c.errs, fmt.Errorf("%w: ParquetBulk schema: %w", ErrInvalidConfig, err))
	case s.Type() != avro.Record:
		c.errs = append(c.errs, fmt.Errorf("%w: ParquetBulk schema is %s, want a record", ErrInvalidConfig, s.Type()))
	default:
		rs := s.(*avro.RecordSchema)
		root, group, err := pqGroupOf(rs, nil, 0)
		if err != nil {
			c.errs = append(c.errs, fmt.Errorf("%w: ParquetBulk schema: %w", ErrInvalidConfig, err))
			break
		}
		b.schema = parquet.NewSchema(rs.Name(), group)
		b.root = root
		if err := b.assignColumns(root); err != nil {
			c.errs = append(c.errs, fmt.Errorf("%w: ParquetBulk schema: %w", ErrInvalidConfig, err))
		}
		b.numCols = len(b.schema.Columns())
		b.flat = true
		for _, f := range root.fields {
			b.flat = b.flat && f.kind == pqLeaf
		}
		if b.flat {
			for _, f := range root.fields {
				b.flatFields = append(b.flatFields, flatField{name: f.name, col: f.col, fast: f.fast, optional: f.optional, node: f})
			}
		}
	}
	b.err = errors.Join(c.errs...)
	return b
}

// ParquetBulkFormat is the bulk format [ParquetBulk] returns.
type ParquetBulkFormat struct {
	cfg     parquetConfig
	schema  *parquet.Schema
	root    *pqNode
	numCols int
	// flat: every field of the record is a leaf column (no group, list or
	// map), so a row has one value per column, in the fields' columns.
	flat bool
	// flatFields are the fields of a flat record, with what flatRecord
	// needs of each in one array.
	flatFields []flatField
	err        error
}

// flatField is a field of a flat record: its name, column and fast
// conversion (see pqNode).
type flatField struct {
	name     string
	col      int
	fast     fastKind
	optional bool
	node     *pqNode
}

type pqKind int

const (
	pqLeaf pqKind = iota
	pqGroup
	pqList
	pqMap
)

// pqNode is a column or group of the Parquet schema made from an Avro
// schema, with what the shredder needs.
type pqNode struct {
	name     string
	path     []string // Parquet path of a leaf
	kind     pqKind
	optional bool
	avro     avro.Schema // leaf: the Avro type (null branch removed)
	field    *avro.Field // the record field, for its default
	col      int         // leaf column index
	fields   []*pqNode   // group
	elem     *pqNode     // list element, map value
	key      *pqNode     // map key
	leaves   []int       // every leaf column under the node
	conv     leafConv    // leaf: the value's coercion, chosen once
	fast     fastKind    // leaf: the Go type converted in place, if any
	width    int64       // leaf: the size of a fixed-width value
}

// fastKind names the conversions flatRecord makes in place: the Go type
// of the value contract for a leaf's Avro type.
type fastKind uint8

const (
	fastNone   fastKind = iota
	fastBool            // boolean: bool
	fastInt64           // long, time-micros: int64
	fastMillis          // timestamp-millis, local-timestamp-millis: time.Time
	fastMicros          // timestamp-micros, local-timestamp-micros: time.Time
	fastDouble          // double: float64
	fastString          // string (uuid too): string
)

// fastKindOf returns the in-place conversion of a leaf of Avro type s and
// the size of its value (as valueSize counts it; a string's is its length
// plus 4).
func fastKindOf(s avro.Schema) (fastKind, int64) {
	if _, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
		return fastNone, 0
	}
	switch s.Type() {
	case avro.Boolean:
		return fastBool, 1
	case avro.Long:
		switch logicalTypeOf(s) {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return fastMillis, 8
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return fastMicros, 8
		}
		return fastInt64, 8
	case avro.Double:
		return fastDouble, 8
	case avro.String:
		return fastString, 0
	}
	return fastNone, 0
}

// leafConv coerces a record's value to a leaf column's physical value.
type leafConv func(p *parquetWriter, v any, path string) (parquet.Value, error)

// leafConvOf returns the coercion of a leaf of Avro type s: the common Go
// type of each Avro type in the value contract is converted at once, and
// anything else goes through leafValue (the coercions AvroBulk applies).
// Choosing it once per schema keeps the per-record cost down.
func leafConvOf(s avro.Schema) leafConv {
	slow := func(p *parquetWriter, v any, path string) (parquet.Value, error) { return p.leafValue(s, v, path) }
	if _, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
		return slow
	}
	lt := logicalTypeOf(s)
	switch s.Type() {
	case avro.Boolean:
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if b, ok := v.(bool); ok {
				return parquet.BooleanValue(b), nil
			}
			return slow(p, v, path)
		}
	case avro.Int:
		if lt == avro.Date {
			return slow
		}
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if i, ok := v.(int64); ok && i >= math.MinInt32 && i <= math.MaxInt32 {
				return parquet.Int32Value(int32(i)), nil
			}
			return slow(p, v, path)
		}
	case avro.Long:
		switch lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
				if t, ok := v.(time.Time); ok {
					return parquet.Int64Value(t.UnixMilli()), nil
				}
				return slow(p, v, path)
			}
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
				if t, ok := v.(time.Time); ok {
					return parquet.Int64Value(t.UnixMicro()), nil
				}
				return slow(p, v, path)
			}
		}
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if i, ok := v.(int64); ok {
				return parquet.Int64Value(i), nil
			}
			return slow(p, v, path)
		}
	case avro.Float:
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if f, ok := v.(float64); ok {
				return parquet.FloatValue(float32(f)), nil
			}
			return slow(p, v, path)
		}
	case avro.Double:
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if f, ok := v.(float64); ok {
				return parquet.DoubleValue(f), nil
			}
			return slow(p, v, path)
		}
	case avro.String:
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			if x, ok := v.(string); ok {
				return parquet.ByteArrayValue(batchBytes(p, x)), nil
			}
			return slow(p, v, path)
		}
	case avro.Bytes:
		return func(p *parquetWriter, v any, path string) (parquet.Value, error) {
			switch x := v.(type) {
			case []byte:
				return parquet.ByteArrayValue(batchBytes(p, x)), nil
			case string:
				return parquet.ByteArrayValue(batchBytes(p, x)), nil
			}
			return slow(p, v, path)
		}
	}
	return slow
}

// pqGroupOf maps a record to a group node.
func pqGroupOf(rs *avro.RecordSchema, path []string, depth int) (*pqNode, parquet.Group, error) {
	if depth > 32 {
		return nil, nil, fmt.Errorf("record %s: nested more than 32 levels (a recursive type?)", rs.FullName())
	}
	g := parquet.Group{}
	n := &pqNode{kind: pqGroup}
	for _, f := range rs.Fields() {
		child, node, err := pqNodeOf(f.Type(), append(path[:len(path):len(path)], f.Name()), depth+1)
		if err != nil {
			return nil, nil, err
		}
		child.name, child.field = f.Name(), f
		g[f.Name()] = node
		n.fields = append(n.fields, child)
	}
	return n, g, nil
}

func pqNodeOf(s avro.Schema, path []string, depth int) (*pqNode, parquet.Node, error) {
	name := strings.Join(path, ".")
	s = deref(s)
	optional := false
	if u, ok := s.(*avro.UnionSchema); ok {
		var other []avro.Schema
		for _, t := range u.Types() {
			if t.Type() == avro.Null {
				optional = true
			} else {
				other = append(other, t)
			}
		}
		if len(other) != 1 {
			return nil, nil, fmt.Errorf("field %s: a union other than [\"null\", T] has no Parquet type", name)
		}
		s = deref(other[0])
	}
	n := &pqNode{optional: optional, avro: s, path: path}
	var node parquet.Node
	switch s.Type() {
	case avro.Record, avro.Error:
		g, group, err := pqGroupOf(s.(*avro.RecordSchema), path, depth)
		if err != nil {
			return nil, nil, err
		}
		g.optional, g.path = optional, path
		n, node = g, group
	case avro.Array:
		elem, en, err := pqNodeOf(s.(*avro.ArraySchema).Items(), append(path[:len(path):len(path)], "list", "element"), depth+1)
		if err != nil {
			return nil, nil, err
		}
		n.kind, n.elem = pqList, elem
		if !elem.optional {
			en = parquet.Required(en)
		}
		node = parquet.List(en)
	case avro.Map:
		val, vn, err := pqNodeOf(s.(*avro.MapSchema).Values(), append(path[:len(path):len(path)], "key_value", "value"), depth+1)
		if err != nil {
			return nil, nil, err
		}
		if !val.optional {
			vn = parquet.Required(vn)
		}
		key := &pqNode{kind: pqLeaf, avro: avro.NewPrimitiveSchema(avro.String, nil), path: append(path[:len(path):len(path)], "key_value", "key")}
		n.kind, n.elem, n.key = pqMap, val, key
		node = parquet.Map(parquet.String(), vn)
	default:
		ln, err := pqLeafOf(s, name)
		if err != nil {
			return nil, nil, err
		}
		node = ln
	}
	if optional {
		node = parquet.Optional(node)
	}
	return n, node, nil
}

func pqLeafOf(s avro.Schema, name string) (parquet.Node, error) {
	lt := logicalTypeOf(s)
	if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
		p := d.Precision()
		switch {
		case p <= 9:
			return parquet.Decimal(d.Scale(), p, parquet.Int32Type), nil
		case p <= 18:
			return parquet.Decimal(d.Scale(), p, parquet.Int64Type), nil
		}
		return parquet.Decimal(d.Scale(), p, parquet.FixedLenByteArrayType(decimalBytes(p))), nil
	}
	switch s.Type() {
	case avro.Boolean:
		return parquet.Leaf(parquet.BooleanType), nil
	case avro.Int:
		switch lt {
		case avro.Date:
			return parquet.Date(), nil
		case avro.TimeMillis:
			return parquet.Time(parquet.Millisecond), nil
		}
		return parquet.Int(32), nil
	case avro.Long:
		switch lt {
		case avro.TimestampMillis:
			return parquet.Timestamp(parquet.Millisecond), nil
		case avro.TimestampMicros:
			return parquet.Timestamp(parquet.Microsecond), nil
		case avro.LocalTimestampMillis:
			return parquet.TimestampAdjusted(parquet.Millisecond, false), nil
		case avro.LocalTimestampMicros:
			return parquet.TimestampAdjusted(parquet.Microsecond, false), nil
		case avro.TimeMicros:
			return parquet.Time(parquet.Microsecond), nil
		}
		return parquet.Int(64), nil
	case avro.Float:
		return parquet.Leaf(parquet.FloatType), nil
	case avro.Double:
		return parquet.Leaf(parquet.DoubleType), nil
	case avro.String, avro.Enum:
		return parquet.String(), nil
	case avro.Bytes:
		return parquet.Leaf(parquet.ByteArrayType), nil
	case avro.Fixed:
		return parquet.Leaf(parquet.FixedLenByteArrayType(s.(*avro.FixedSchema).Size())), nil
	}
	return nil, fmt.Errorf("field %s: Avro type %s has no Parquet type", name, s.Type())
}

// decimalBytes is the size of the smallest two's complement integer that
// holds every decimal of precision p.
func decimalBytes(p int) int {
	return int(math.Ceil((float64(p)*math.Log2(10) + 1) / 8))
}

// assignColumns finds each leaf's column index and every node's leaves.
func (b *ParquetBulkFormat) assignColumns(n *pqNode) error {
	switch n.kind {
	case pqLeaf:
		lc, ok := b.schema.Lookup(n.path...)
		if !ok {
			return fmt.Errorf("column %s not found", strings.Join(n.path, "."))
		}
		n.col = lc.ColumnIndex
		n.leaves = []int{n.col}
		n.conv = leafConvOf(n.avro)
		n.fast, n.width = fastKindOf(n.avro)
		return nil
	case pqGroup:
		for _, f := range n.fields {
			if err := b.assignColumns(f); err != nil {
				return err
			}
			n.leaves = append(n.leaves, f.leaves...)
		}
		return nil
	case pqMap:
		if err := b.assignColumns(n.key); err != nil {
			return err
		}
		n.leaves = append(n.leaves, n.key.leaves...)
	}
	if err := b.assignColumns(n.elem); err != nil {
		return err
	}
	n.leaves = append(n.leaves, n.elem.leaves...)
	return nil
}

var _ BulkFormat[map[string]any] = (*ParquetBulkFormat)(nil)

// Err reports an invalid schema (one with no Parquet mapping, such as a
// union of two types) or option, wrapping [ErrInvalidConfig], at once;
// NewWriter returns it too.
func (b *ParquetBulkFormat) Err() error { return b.err }

// NewWriter returns a writer of one Parquet file to w.
func (b *ParquetBulkFormat) NewWriter(w io.Writer) (BulkWriter[map[string]any], error) {
	if b.err != nil {
		return nil, b.err
	}
	cols := make([][]parquet.Value, b.numCols)
	for i := range cols {
		// A flat record puts one value in each column, at index n; a
		// nested one appends.
		if b.flat {
			cols[i] = make([]parquet.Value, parquetBatch)
		} else {
			cols[i] = make([]parquet.Value, 0, parquetBatch)
		}
	}
	p := &parquetWriter{f: b, cols: cols, marks: make([]int, b.numCols)}
	schema := b.schema
	if b.flat {
		p.typed = make([]parquet.ColumnBuffer, b.numCols)
		schema = b.typedSchema(p.typed)
	}
	p.w = parquet.NewGenericWriter[any](w, schema, parquet.Compression(b.cfg.codec))
	if b.flat {
		p.stage = make([]flatStage, b.numCols)
		for _, f := range b.flatFields {
			st := &p.stage[f.col]
			st.kind, st.optional = f.fast, f.optional
			switch f.fast {
			case fastBool:
				st.b = make([]bool, parquetBatch)
			case fastInt64, fastMillis, fastMicros:
				st.i64 = make([]int64, parquetBatch)
			case fastDouble:
				st.f64 = make([]float64, parquetBatch)
			case fastString:
				st.s = make([]string, parquetBatch)
			}
			if f.fast != fastNone {
				st.slow = make([]bool, parquetBatch)
			}
		}
	}
	return p, nil
}

// typedSchema is the writer's copy of a flat schema in which every
// required column of a typed stage (boolean, long, timestamp, double) has
// a captureType: the column buffer parquet-go's ColumnWriter makes for it
// lands in bufs[column], so that flush can hand the stage's typed array
// to it in one call (see flatStage.writeTyped). The copy describes the
// same columns, in the same order, with the same types: the file is the
// same as with b.schema.
func (b *ParquetBulkFormat) typedSchema(bufs []parquet.ColumnBuffer) *parquet.Schema {
	g := parquet.Group{}
	for _, f := range b.schema.Fields() {
		g[f.Name()] = f
	}
	for _, f := range b.flatFields {
		switch f.fast {
		case fastBool, fastInt64, fastMillis, fastMicros, fastDouble:
		default:
			continue
		}
		if n := g[f.name]; !f.optional && n.Leaf() && !n.Optional() && !n.Repeated() {
			g[f.name] = parquet.Leaf(&captureType{Type: n.Type(), buf: &bufs[f.col]})
		}
	}
	return parquet.NewSchema(b.schema.Name(), g)
}

// captureType is a column's parquet.Type (every method its own) that
// keeps the column buffer made from it in *buf. parquet-go's ColumnWriter
// of a required column makes its one buffer with the type's
// NewColumnBuffer when the column is first written, keeps it for every
// row group, and cuts its pages from it; its public API takes only
// []parquet.Value, which would cost a 24-byte Value per typed value.
type captureType struct {
	parquet.Type
	buf *parquet.ColumnBuffer
}

func (t *captureType) NewColumnBuffer(columnIndex, numValues int) parquet.ColumnBuffer {
	b := t.Type.NewColumnBuffer(columnIndex, numValues)
	*t.buf = b
	return b
}

// errTypedWrite reports a column buffer that did not take a typed batch
// as expected (a parquet-go whose ColumnWriter no longer writes its pages
// from the buffer its type made, say): the file would be wrong, so the
// writer fails rather than go on.
var errTypedWrite = errors.New("parquet-go column buffer did not take the typed values")

// writeTyped appends the first n staged values of a column without slow
// values to its parquet-go column buffer buf with one typed call (the
// buffer's WriteBooleans, WriteInt64s or WriteDoubles, as parquet-go's
// struct writer does) and reports whether it did; ok is false for a kind
// without a typed call, or a buffer without it.
func (st *flatStage) writeTyped(buf parquet.ColumnBuffer, n int) (ok bool, err error) {
	before := buf.Len()
	switch st.kind {
	case fastBool:
		w, is := buf.(parquet.BooleanWriter)
		if !is {
			return false, nil
		}
		_, err = w.WriteBooleans(st.b[:n])
	case fastInt64, fastMillis, fastMicros:
		w, is := buf.(parquet.Int64Writer)
		if !is {
			return false, nil
		}
		_, err = w.WriteInt64s(st.i64[:n])
	case fastDouble:
		w, is := buf.(parquet.DoubleWriter)
		if !is {
			return false, nil
		}
		_, err = w.WriteDoubles(st.f64[:n])
	default:
		return false, nil
	}
	if err == nil && buf.Len() != before+n {
		err = fmt.Errorf("%w: %d values written, the buffer grew from %d to %d", errTypedWrite, n, before, buf.Len())
	}
	return true, err
}

// flatStage holds a flat column's values of the batch in their Go types
// (one slice, by the column's fastKind, indexed by record) until flush
// makes them parquet.Values in one pass over the column: a record costs
// one typed store per field rather than a 24-byte Value in one of five
// arrays. A value that took flatValue (null, a default, another Go type)
// is in the column's Value batch already, marked in slow. A column
// without a fast kind puts every value in its Value batch directly.
type flatStage struct {
	kind     fastKind
	optional bool
	b        []bool
	i64      []int64
	f64      []float64
	s        []string
	slow     []bool
	anySlow  bool
}

// fill makes the first len(vals) staged values of column col Values,
// leaving those marked slow as they are.
func (st *flatStage) fill(vals []parquet.Value, col int) {
	if st.kind == fastNone {
		return
	}
	def := 0
	if st.optional {
		def = 1
	}
	slow := st.slow[:len(vals)]
	switch st.kind {
	case fastBool:
		for j, x := range st.b[:len(vals)] {
			if !slow[j] {
				vals[j] = parquet.BooleanValue(x)
			}
		}
	case fastInt64, fastMillis, fastMicros:
		for j, x := range st.i64[:len(vals)] {
			if !slow[j] {
				vals[j] = parquet.Int64Value(x)
			}
		}
	case fastDouble:
		for j, x := range st.f64[:len(vals)] {
			if !slow[j] {
				vals[j] = parquet.DoubleValue(x)
			}
		}
	case fastString:
		for j, x := range st.s[:len(vals)] {
			if !slow[j] {
				// No copy: parquet-go copies the bytes into its column
				// buffer when the batch is written, and a string never
				// changes.
				vals[j] = parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(x), len(x)))
				st.s[j] = ""
			}
		}
	}
	if def != 0 {
		for j := range vals {
			if !slow[j] {
				vals[j] = vals[j].Level(0, def, col)
			}
		}
	}
	if st.anySlow {
		clear(slow)
		st.anySlow = false
	}
}

// parquetBatch is how many records the writer collects, column by column,
// before it hands each column's values to parquet-go's column writer in
// one call; parquetBatchBytes bounds the bytes of values collected (so
// that a data page, which parquet-go cuts only between calls, grows past
// parquet-go's 256 KiB page buffer by at most that much).
const (
	parquetBatch      = 1024
	parquetBatchBytes = 256 << 10
)

// parquetWriter writes a Parquet file column by column: each record's
// values are appended to their columns' batches (a flat record's fields
// straight into their columns, a nested record shredded into them), and
// every parquetBatch records each column's batch is written with its
// ColumnWriter.WriteRowValues, skipping parquet-go's row path (WriteRows,
// which splits rows into columns again).
type parquetWriter struct {
	f   *ParquetBulkFormat
	w   *parquet.GenericWriter[any]
	enc avroEncoder
	// cols are the collected values of each column, whole records only:
	// the first n of each (flat schemas: every column has parquetBatch
	// values, one per record) or all of them (nested schemas).
	cols [][]parquet.Value
	// marks are the columns' lengths before the record being shredded, to
	// drop its values when it fails (nested schemas).
	marks []int
	// stage holds the typed values of a flat schema's columns (see
	// flatStage); nil for a nested schema.
	stage []flatStage
	// typed are the parquet-go column buffers of the flat schema's typed
	// columns, once their ColumnWriters made them (see typedSchema); nil
	// for other columns and before a column's first write.
	typed []parquet.ColumnBuffer
	// strs holds the bytes of the collected string and bytes values: the
	// values point into it until the batch is written (parquet-go copies
	// them then).
	strs  []byte
	n     int   // records collected
	batch int64 // bytes of values collected
	size  int64 // bytes of values in the open row group
}

// batchBytes returns a copy of b in the batch's buffer: the collected
// values point into it until the batch is written (parquet-go copies them
// then), so a record's []byte may change after Write returns.
func batchBytes[B string | []byte](p *parquetWriter, b B) []byte {
	if len(p.strs)+len(b) > cap(p.strs) {
		// A new buffer: the values collected so far keep the old one.
		p.strs = make([]byte, 0, max(64<<10, 2*len(b)))
	}
	n := len(p.strs)
	p.strs = append(p.strs, b...)
	return p.strs[n:len(p.strs):len(p.strs)]
}

func (p *parquetWriter) Write(v map[string]any) error {
	var size int64
	var err error
	if p.f.flat {
		size, err = p.flatRecord(v)
	} else {
		size, err = p.nestedRecord(v)
	}
	if err != nil {
		return fmt.Errorf("file: Parquet record: %w", err)
	}
	p.n++
	p.batch += size
	p.size += size
	if p.n == parquetBatch || p.batch >= parquetBatchBytes || p.size >= p.f.cfg.rowGroupSize {
		return p.flush()
	}
	return nil
}

// flush writes the collected values column by column, and ends the row
// group when it reached its size.
func (p *parquetWriter) flush() error {
	if p.n > 0 {
		for i, cw := range p.w.ColumnWriters() {
			vals := p.cols[i]
			if p.f.flat {
				st := &p.stage[i]
				typed := false
				if buf := p.typed[i]; buf != nil && !st.anySlow {
					var err error
					if typed, err = st.writeTyped(buf, p.n); err != nil {
						return fmt.Errorf("file: Parquet write column %s: %w", strings.Join(p.f.schema.Columns()[i], "."), err)
					}
				}
				if typed {
					// The values are in the buffer: writing none lets
					// the column writer cut a page if the buffer
					// reached the page size.
					vals = vals[:0]
				} else {
					vals = vals[:p.n]
					st.fill(vals, i)
				}
			}
			if _, err := cw.WriteRowValues(vals); err != nil {
				return fmt.Errorf("file: Parquet write column %s: %w", strings.Join(p.f.schema.Columns()[i], "."), err)
			}
			if !p.f.flat {
				p.cols[i] = vals[:0]
			}
		}
		p.n, p.batch = 0, 0
		p.strs = p.strs[:0]
	}
	if p.size >= p.f.cfg.rowGroupSize {
		p.size = 0
		if err := p.w.Flush(); err != nil {
			return fmt.Errorf("file: Parquet row group: %w", err)
		}
	}
	return nil
}

// flatRecord stages the values of a record whose fields are all leaf
// columns at index n of their columns, and returns their size. On an
// error the record counts for nothing (what it staged at n is
// overwritten by the next record).
//
// A value of the Go type the value contract gives its column's type is
// stored in the column's typed stage (the switch on the column's
// fastKind, chosen once per schema; flush makes the Values); anything
// else — a missing field, null, another Go type, a logical type without
// a fast path — goes through flatValue into the column's Value batch.
func (p *parquetWriter) flatRecord(m map[string]any) (int64, error) {
	if m == nil {
		return 0, p.enc.fail("", "null for a required column")
	}
	var size int64
	n := p.n
	for i := range p.f.flatFields {
		f := &p.f.flatFields[i]
		fv, ok := m[f.name]
		if ok {
			st := &p.stage[f.col]
			switch f.fast {
			case fastBool:
				if x, is := fv.(bool); is {
					st.b[n] = x
					size++
					continue
				}
			case fastInt64:
				if x, is := fv.(int64); is {
					st.i64[n] = x
					size += 8
					continue
				}
			case fastMillis:
				if t, is := fv.(time.Time); is {
					st.i64[n] = t.UnixMilli()
					size += 8
					continue
				}
			case fastMicros:
				if t, is := fv.(time.Time); is {
					st.i64[n] = t.UnixMicro()
					size += 8
					continue
				}
			case fastDouble:
				if x, is := fv.(float64); is {
					st.f64[n] = x
					size += 8
					continue
				}
			case fastString:
				if x, is := fv.(string); is {
					st.s[n] = x
					size += int64(len(x)) + 4
					continue
				}
			}
		}
		pv, err := p.flatValue(f.node, fv, ok)
		if err != nil {
			p.unstage(n)
			return 0, err
		}
		p.cols[f.col][n] = pv
		if st := &p.stage[f.col]; st.kind != fastNone {
			st.slow[n], st.anySlow = true, true
		}
		size += int64(valueSize(pv))
	}
	return size, nil
}

// unstage drops the slow marks of the failed record at index n.
func (p *parquetWriter) unstage(n int) {
	for i := range p.stage {
		if st := &p.stage[i]; st.anySlow {
			st.slow[n] = false
		}
	}
}

// flatValue is the value of field f of a flat record, fv (ok: present in
// the record), with its levels: the field's default if missing, null, or
// fv coerced by the field's leafConv.
func (p *parquetWriter) flatValue(f *pqNode, fv any, ok bool) (parquet.Value, error) {
	if !ok && f.field != nil && f.field.HasDefault() {
		d, err := avroDefault(f.field)
		if err != nil {
			return parquet.Value{}, p.enc.fail(f.name, "default: %v", err)
		}
		fv, ok = d, true
	}
	if !ok && !f.optional {
		return parquet.Value{}, p.enc.fail(f.name, "missing, and the schema gives no default")
	}
	if fv == nil {
		if !f.optional {
			return parquet.Value{}, p.enc.fail(f.name, "null for a required column")
		}
		return parquet.NullValue().Level(0, 0, f.col), nil
	}
	pv, err := f.conv(p, fv, f.name)
	if err != nil {
		return parquet.Value{}, err
	}
	def := 0
	if f.optional {
		def = 1
	}
	return pv.Level(0, def, f.col), nil
}

// nestedRecord shreds a record with groups, lists or maps into the
// columns and returns the size of its values. On an error no column
// keeps a value of the record.
func (p *parquetWriter) nestedRecord(v map[string]any) (int64, error) {
	for i, c := range p.cols {
		p.marks[i] = len(c)
	}
	if err := p.shred(p.f.root, v, 0, 0, 0, ""); err != nil {
		for i, n := range p.marks {
			p.cols[i] = p.cols[i][:n]
		}
		return 0, err
	}
	var size int64
	for i, c := range p.cols {
		for _, v := range c[p.marks[i]:] {
			size += int64(valueSize(v))
		}
	}
	return size, nil
}

func valueSize(v parquet.Value) int {
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return len(v.ByteArray()) + 4
	case parquet.Int64, parquet.Double:
		return 8
	case parquet.Int96:
		return 12
	case parquet.Boolean:
		return 1
	}
	return 4
}

func (p *parquetWriter) Finish() error {
	if err := p.flush(); err != nil {
		return err
	}
	if err := p.w.Close(); err != nil {
		return fmt.Errorf("file: Parquet close: %w", err)
	}
	return nil
}

// nulls appends a null with levels rep, def to every leaf under n.
func (p *parquetWriter) nulls(n *pqNode, rep, def int) {
	for _, c := range n.leaves {
		p.cols[c] = append(p.cols[c], parquet.NullValue().Level(rep, def, c))
	}
}

// shred appends the values of v at node n (Dremel's record shredding):
// rep is the repetition level of its first value, def the definition
// level of its parent, depth the number of repeated ancestors.
func (p *parquetWriter) shred(n *pqNode, v any, rep, def, depth int, path string) error {
	if v == nil {
		if n.optional {
			p.nulls(n, rep, def)
			return nil
		}
		return p.enc.fail(path, "null for a required column")
	}
	if n.optional {
		def++
	}
	switch n.kind {
	case pqGroup:
		m, ok := v.(map[string]any)
		if !ok {
			return p.enc.fail(path, "%s for a record", describe(v))
		}
		for _, f := range n.fields {
			fp := fieldPath(path, f.name)
			fv, ok := m[f.name]
			if !ok && f.field != nil && f.field.HasDefault() {
				d, err := avroDefault(f.field)
				if err != nil {
					return p.enc.fail(fp, "default: %v", err)
				}
				fv, ok = d, true
			}
			if !ok && !f.optional {
				return p.enc.fail(fp, "missing, and the schema gives no default")
			}
			if err := p.shred(f, fv, rep, def, depth, fp); err != nil {
				return err
			}
		}
		return nil
	case pqList:
		list, ok := v.([]any)
		if !ok {
			return p.enc.fail(path, "%s for an array", describe(v))
		}
		if len(list) == 0 {
			p.nulls(n, rep, def)
			return nil
		}
		for i, e := range list {
			r := rep
			if i > 0 {
				r = depth + 1
			}
			if err := p.shred(n.elem, e, r, def+1, depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case pqMap:
		m, ok := v.(map[string]any)
		if !ok {
			return p.enc.fail(path, "%s for a map", describe(v))
		}
		if len(m) == 0 {
			p.nulls(n, rep, def)
			return nil
		}
		for i, k := range slices.Sorted(maps.Keys(m)) {
			e := m[k]
			r := rep
			if i > 0 {
				r = depth + 1
			}
			if err := p.shred(n.key, k, r, def+1, depth+1, path); err != nil {
				return err
			}
			if err := p.shred(n.elem, e, r, def+1, depth+1, fmt.Sprintf("%s[%q]", path, k)); err != nil {
				return err
			}
		}
		return nil
	}
	pv, err := n.conv(p, v, path)
	if err != nil {
		return err
	}
	p.cols[n.col] = append(p.cols[n.col], pv.Level(rep, def, n.col))
	return nil
}

// leafValue coerces v to the physical value of an Avro primitive.
func (p *parquetWriter) leafValue(s avro.Schema, v any, path string) (parquet.Value, error) {
	e := &p.enc
	if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
		n, err := e.unscaled(v, path, d)
		if err != nil {
			return parquet.Value{}, err
		}
		switch prec := d.Precision(); {
		case prec <= 9:
			return parquet.Int32Value(int32(n.Int64())), nil
		case prec <= 18:
			return parquet.Int64Value(n.Int64()), nil
		default:
			return parquet.FixedLenByteArrayValue(twosComplement(n, decimalBytes(prec))), nil
		}
	}
	lt := logicalTypeOf(s)
	switch s.Type() {
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return parquet.Value{}, e.fail(path, "%s for boolean", describe(v))
		}
		return parquet.BooleanValue(b), nil
	case avro.Int:
		var i int64
		var err error
		if lt == avro.Date {
			i, err = e.days(v, path)
		} else {
			i, err = e.integer(v, path, "int")
		}
		if err != nil {
			return parquet.Value{}, err
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return parquet.Value{}, e.fail(path, "%d does not fit an int (INT32)", i)
		}
		return parquet.Int32Value(int32(i)), nil
	case avro.Long:
		var i int64
		var err error
		switch lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis, avro.TimestampMicros, avro.LocalTimestampMicros:
			i, err = e.timestamp(v, path, lt == avro.TimestampMicros || lt == avro.LocalTimestampMicros)
		default:
			i, err = e.integer(v, path, "long")
		}
		if err != nil {
			return parquet.Value{}, err
		}
		return parquet.Int64Value(i), nil
	case avro.Float:
		f, err := e.float(v, path, "float")
		return parquet.FloatValue(float32(f)), err
	case avro.Double:
		f, err := e.float(v, path, "double")
		return parquet.DoubleValue(f), err
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		sym, ok := v.(string)
		if !ok {
			return parquet.Value{}, e.fail(path, "%s for enum %s", describe(v), es.FullName())
		}
		for _, x := range es.Symbols() {
			if x == sym {
				return parquet.ByteArrayValue(batchBytes(p, sym)), nil
			}
		}
		return parquet.Value{}, e.fail(path, "%q is not a symbol of enum %s %v", sym, es.FullName(), es.Symbols())
	case avro.String, avro.Bytes:
		switch x := v.(type) {
		case string:
			return parquet.ByteArrayValue(batchBytes(p, x)), nil
		case []byte:
			return parquet.ByteArrayValue(batchBytes(p, x)), nil
		}
		if s.Type() == avro.String {
			switch x := v.(type) {
			case json.Number:
				return parquet.ByteArrayValue(batchBytes(p, string(x))), nil
			case time.Time:
				return parquet.ByteArrayValue(x.AppendFormat(nil, time.RFC3339Nano)), nil
			}
		}
		return parquet.Value{}, e.fail(path, "%s for %s", describe(v), s.Type())
	case avro.Fixed:
		size := s.(*avro.FixedSchema).Size()
		var b []byte
		switch x := v.(type) {
		case []byte:
			b = batchBytes(p, x)
		case string:
			b = batchBytes(p, x)
		default:
			return parquet.Value{}, e.fail(path, "%s for fixed(%d)", describe(v), size)
		}
		if len(b) != size {
			return parquet.Value{}, e.fail(path, "%d bytes for fixed(%d)", len(b), size)
		}
		return parquet.FixedLenByteArrayValue(b), nil
	}
	return parquet.Value{}, e.fail(path, "unsupported type %s", s.Type())
}
