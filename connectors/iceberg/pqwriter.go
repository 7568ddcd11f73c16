package iceberg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/apache/iceberg-go"
	icebergio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"
	pqcompress "github.com/parquet-go/parquet-go/compress"
)

// The parquet-go data file writer. A row's values are converted once into
// parquet.Values of their columns; the row's partition tuple is computed
// with the spec's transforms, and the values are staged for that
// partition's open file (opened at the partition's first row), with each
// column's statistics (null, NaN counts, lower and upper bounds) updated
// as they are staged. Every pqBatch rows a partition's staged values go to
// its file column by column (ColumnWriter.WriteRowValues); write ends the
// files, at a checkpoint or when the rows reach the target size. The
// Parquet schema carries every column's Iceberg field id, and the
// manifest statistics come from the values written (bounds in Iceberg's
// single-value binary form, strings and binary truncated to 16 as the
// default metrics mode truncate(16)) and the file's footer (column sizes,
// split offsets).

const (
	// pqBatch is the number of rows handed to a column writer at once.
	pqBatch = 4096
	// pqTruncate is the length of string and binary bounds (Iceberg's
	// default metrics mode truncate(16)).
	pqTruncate = 16
	// pqMetricsDefault is the only metrics mode the writer implements.
	pqMetricsDefault = "truncate(16)"
)

// pqPlan is what the writer needs of a table: made once per table schema.
type pqPlan struct {
	schema        *parquet.Schema // the Parquet schema, with field ids
	cols          []pqCol         // the table's columns, in schema order
	byName        map[string]int
	evField       int // column filled from the event time; -1 = none
	spec          iceberg.PartitionSpec
	parts         []pqPartField
	codec         pqcompress.Codec
	rowGroupBytes int64
	pageBytes     int
	loc           table.LocationProvider
	fs            icebergio.WriteFileIO
}

// pqCol is one top-level column of the table.
type pqCol struct {
	name     string
	id       int
	typ      iceberg.Type
	required bool
	leaf     int // its column index in the Parquet schema
	kind     pqKind
}

type pqKind int

const (
	pqBool pqKind = iota
	pqInt32
	pqInt64
	pqFloat32
	pqFloat64
	pqString
	pqBinary
	pqDate
	pqTimestamp
)

// pqPartField is one field of the partition spec, bound to its source
// column.
type pqPartField struct {
	id      int
	col     int // source column
	apply   func(any) any
	escaped string
	field   iceberg.PartitionField
	result  iceberg.Type
}

// pqUnsupported says why the parquet-go writer cannot write tbl's data
// files ("" if it can): the sink then uses iceberg-go's Arrow writer.
func pqUnsupported(tbl *table.Table) string {
	props := tbl.Properties()
	if f := props.Get(table.WriteFormatDefaultKey, table.WriteFormatDefaultDefault); !strings.EqualFold(f, "parquet") {
		return fmt.Sprintf("%s is %q", table.WriteFormatDefaultKey, f)
	}
	for k, v := range props {
		switch {
		case k == table.DefaultWriteMetricsModeKey && v != pqMetricsDefault,
			strings.HasPrefix(k, table.MetricsModeColumnConfPrefix+"."),
			k == table.ParquetCompressionLevelKey,
			strings.HasPrefix(k, table.ParquetBloomFilterColumnEnabledKeyPrefix):
			return fmt.Sprintf("table property %s=%s", k, v)
		}
	}
	if _, err := pqCodec(props); err != nil {
		return err.Error()
	}
	sc := tbl.Schema()
	if san, err := iceberg.SanitizeColumnNames(sc); err != nil || !san.Equals(sc) {
		return "column names that iceberg-go sanitizes"
	}
	for _, f := range sc.Fields() {
		if _, err := pqKindOf(f.Type); err != nil {
			return fmt.Sprintf("column %q: %v", f.Name, err)
		}
	}
	spec := tbl.Spec()
	for _, f := range spec.Fields() {
		src, ok := sc.FindFieldByID(f.SourceID())
		if !ok {
			return fmt.Sprintf("partition field %s: no source column %d", f.Name, f.SourceID())
		}
		if _, err := bindTransform(f.Transform, src.Type); err != nil {
			return fmt.Sprintf("partition field %s: %v", f.Name, err)
		}
	}
	return ""
}

func pqCodec(props iceberg.Properties) (pqcompress.Codec, error) {
	switch c := props.Get(table.ParquetCompressionKey, table.ParquetCompressionDefault); c {
	case "zstd":
		return &parquet.Zstd, nil
	case "snappy":
		return &parquet.Snappy, nil
	case "gzip":
		return &parquet.Gzip, nil
	case "uncompressed":
		return &parquet.Uncompressed, nil
	case "lz4_raw":
		return &parquet.Lz4Raw, nil
	default:
		return nil, fmt.Errorf("compression codec %q", c)
	}
}

func pqKindOf(t iceberg.Type) (pqKind, error) {
	switch t.(type) {
	case iceberg.BooleanType:
		return pqBool, nil
	case iceberg.Int32Type:
		return pqInt32, nil
	case iceberg.Int64Type:
		return pqInt64, nil
	case iceberg.Float32Type:
		return pqFloat32, nil
	case iceberg.Float64Type:
		return pqFloat64, nil
	case iceberg.StringType:
		return pqString, nil
	case iceberg.BinaryType:
		return pqBinary, nil
	case iceberg.DateType:
		return pqDate, nil
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return pqTimestamp, nil
	}
	return 0, fmt.Errorf("type %s is not supported by the sink (boolean, int, long, float, double, string, binary, date, timestamp, timestamptz)", t)
}

// pqNodeOf is the Parquet type of a column, as the Iceberg spec maps
// them (and iceberg-go's Arrow writer writes them).
func pqNodeOf(k pqKind, t iceberg.Type) parquet.Node {
	switch k {
	case pqBool:
		return parquet.Leaf(parquet.BooleanType)
	case pqInt32:
		return parquet.Int(32)
	case pqInt64:
		return parquet.Int(64)
	case pqFloat32:
		return parquet.Leaf(parquet.FloatType)
	case pqFloat64:
		return parquet.Leaf(parquet.DoubleType)
	case pqString:
		return parquet.String()
	case pqBinary:
		return parquet.Leaf(parquet.ByteArrayType)
	case pqDate:
		return parquet.Date()
	default: // timestamp: UTC-adjusted for timestamptz only
		_, tz := t.(iceberg.TimestampTzType)
		return parquet.TimestampAdjusted(parquet.Microsecond, tz)
	}
}

// bindTransform returns the function of a partition transform on the
// values the writer computes for a source column of type src (int32,
// int64, float32, float64, bool, string, []byte, iceberg.Date,
// iceberg.Timestamp), with the result's Go type as iceberg-go's own
// writer produces it (iceberg.Date for day, int32 for year, month, hour
// and bucket, the source's for identity and truncate).
func bindTransform(tr iceberg.Transform, src iceberg.Type) (func(any) any, error) {
	opt := func(f func(any) iceberg.Optional[int32], date bool) func(any) any {
		return func(v any) any {
			r := f(v)
			switch {
			case !r.Valid:
				return nil
			case date:
				return iceberg.Date(r.Val)
			}
			return r.Val
		}
	}
	switch t := tr.(type) {
	case iceberg.IdentityTransform:
		return func(v any) any { return v }, nil
	case iceberg.BucketTransform:
		if !t.CanTransform(src) {
			return nil, fmt.Errorf("bucket does not apply to %s", src)
		}
		return opt(t.Transformer(src), false), nil
	case iceberg.TruncateTransform:
		return t.Transformer(src)
	case iceberg.TimeTransform:
		f, err := t.Transformer(src)
		if err != nil {
			return nil, err
		}
		_, day := tr.(iceberg.DayTransform)
		return opt(f, day), nil
	}
	return nil, fmt.Errorf("transform %s is not supported by the parquet-go writer", tr)
}

func newPQPlan(ctx context.Context, tbl *table.Table, eventTimeColumn string) (*pqPlan, error) {
	sc := tbl.Schema()
	props := tbl.Properties()
	p := &pqPlan{byName: map[string]int{}, evField: -1, spec: tbl.Spec()}
	g := parquet.Group{}
	for i, f := range sc.Fields() {
		k, err := pqKindOf(f.Type)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrUnsupportedSchema, f.Name, err)
		}
		n := pqNodeOf(k, f.Type)
		if f.Required {
			n = parquet.Required(n)
		} else {
			n = parquet.Optional(n)
		}
		g[f.Name] = parquet.FieldID(n, f.ID)
		p.cols = append(p.cols, pqCol{name: f.Name, id: f.ID, typ: f.Type, required: f.Required, kind: k})
		p.byName[f.Name] = i
	}
	p.schema = parquet.NewSchema("table", g)
	for leaf, path := range p.schema.Columns() {
		p.cols[p.byName[path[0]]].leaf = leaf
	}
	if eventTimeColumn != "" {
		i, ok := p.byName[eventTimeColumn]
		if !ok {
			return nil, fmt.Errorf("%w: EventTimeColumn %q is not a column of the table", ErrInvalidConfig, eventTimeColumn)
		}
		switch p.cols[i].kind {
		case pqTimestamp, pqInt64, pqDate:
		default:
			return nil, fmt.Errorf("%w: EventTimeColumn %q is a %s column; want timestamp, timestamptz, date or long", ErrInvalidConfig, eventTimeColumn, p.cols[i].typ)
		}
		p.evField = i
	}
	ptype := p.spec.PartitionType(sc)
	for i, f := range p.spec.Fields() {
		src, ok := sc.FindFieldByID(f.SourceID())
		if !ok {
			return nil, fmt.Errorf("partition field %s: no source column %d", f.Name, f.SourceID())
		}
		apply, err := bindTransform(f.Transform, src.Type)
		if err != nil {
			return nil, fmt.Errorf("partition field %s: %w", f.Name, err)
		}
		p.parts = append(p.parts, pqPartField{id: f.FieldID, col: p.byName[src.Name], apply: apply,
			escaped: f.EscapedName(), field: f, result: ptype.FieldList[i].Type})
	}
	var err error
	if p.codec, err = pqCodec(props); err != nil {
		return nil, err
	}
	p.rowGroupBytes = int64(props.GetInt(table.ParquetRowGroupSizeBytesKey, table.ParquetRowGroupSizeBytesDefault))
	p.pageBytes = props.GetInt(table.ParquetPageSizeBytesKey, table.ParquetPageSizeBytesDefault)
	if p.loc, err = tbl.LocationProvider(); err != nil {
		return nil, fmt.Errorf("location provider: %w", err)
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("table file IO: %w", err)
	}
	wfs, ok := fsys.(icebergio.WriteFileIO)
	if !ok {
		return nil, fmt.Errorf("table file IO %T cannot write files", fsys)
	}
	p.fs = wfs
	return p, nil
}

// pqWriter is the parquet-go dataWriter of one subtask. Each partition's
// file is opened at its first row and written as the rows come, pqBatch
// rows per column at a time (parquet-go keeps a row group's compressed
// pages until it ends); write ends the files.
type pqWriter struct {
	p       *pqPlan
	subtask int
	parts   map[string]*pqPart
	order   []*pqPart // in the order of their first row
	last    *pqPart
	rows    int
	bytes   int64
	row     []parquet.Value // the row being added, by column
	tuple   []any
	key     []byte
	id      uuid.UUID // of the files since the last write
	files   int       // files opened, for names
}

// pqPart is the open data file of one partition.
type pqPart struct {
	tuple      []any       // partition values, in spec order
	values     map[int]any // by partition field id
	dir        string      // partition path (field=value/…)
	path       string      // the file's location
	f          icebergio.FileWriter
	cw         *countWriter
	pw         *parquet.GenericWriter[any]
	vals       [][]parquet.Value // staged rows by leaf column, up to pqBatch
	staged     int
	stats      []pqStats // by column
	rows       int
	bytes      int64 // estimated size of the rows
	groupBytes int64 // of the rows in the open row group
}

// pqStats are a column's statistics over a file's values.
type pqStats struct {
	nulls, nans int64
	has         bool // lo, hi are set
	loI, hiI    int64
	loF, hiF    float64
	loB, hiB    []byte
}

func newPQWriter(p *pqPlan, subtask int) *pqWriter {
	return &pqWriter{p: p, subtask: subtask, parts: map[string]*pqPart{}, row: make([]parquet.Value, len(p.cols)), tuple: make([]any, len(p.parts))}
}

func (w *pqWriter) buffered() int64          { return w.bytes }
func (w *pqWriter) newFields(r Row) []string { return newFieldsOf(r, w.p.byName) }

// release aborts the open files: closed and removed (best effort; else
// they stay as orphans, as files of a failed attempt do).
func (w *pqWriter) release() {
	for _, part := range w.order {
		if part.f != nil {
			_ = part.f.Close()
			_ = w.p.fs.Remove(part.path)
		}
	}
	w.parts, w.order, w.last = map[string]*pqPart{}, nil, nil
	w.rows, w.bytes = 0, 0
}

func (w *pqWriter) add(r Row, eventTime int64, hasEventTime bool) error {
	p := w.p
	size, found := 0, 0
	for i := range p.cols {
		c := &p.cols[i]
		v, ok := r[c.name]
		if ok {
			found++
		}
		if v == nil && i == p.evField && hasEventTime {
			v = time.UnixMilli(eventTime).UTC()
		}
		if v == nil {
			if c.required {
				return fmt.Errorf("%w: column %q is required, the record has no value for it", ErrBadRecord, c.name)
			}
			w.row[i] = parquet.NullValue().Level(0, 0, c.leaf)
			size++
			continue
		}
		pv, n, err := c.value(v)
		if err != nil {
			return fmt.Errorf("%w: column %q: %w", ErrBadRecord, c.name, err)
		}
		def := 1
		if c.required {
			def = 0
		}
		w.row[i] = pv.Level(0, def, c.leaf)
		size += n
	}
	if found < len(r) { // r has keys that are not columns
		for k, v := range r {
			if _, ok := p.byName[k]; !ok && v != nil { // null is the same as missing
				return fmt.Errorf("%w: field %q is not a column of the table (AddColumns adds such fields as columns)", ErrBadRecord, k)
			}
		}
	}
	part, err := w.partition()
	if err != nil {
		return err
	}
	for i := range p.cols {
		v := w.row[i]
		part.vals[p.cols[i].leaf] = append(part.vals[p.cols[i].leaf], v)
		part.stats[i].update(p.cols[i].kind, v)
	}
	part.staged++
	part.rows++
	part.bytes += int64(size)
	w.rows++
	w.bytes += int64(size)
	if part.staged == pqBatch {
		return w.p.writeBatch(part)
	}
	return nil
}

// value converts v to the column's Parquet value (levels not set) and
// its estimated size.
func (c *pqCol) value(v any) (parquet.Value, int, error) {
	switch c.kind {
	case pqBool:
		b, err := parseBool(v)
		return parquet.BooleanValue(b), 1, err
	case pqInt32:
		n, err := parseInt32(v)
		return parquet.Int32Value(n), 4, err
	case pqInt64:
		n, err := parseInt64(v)
		return parquet.Int64Value(n), 8, err
	case pqFloat32:
		f, err := toFloat(v)
		return parquet.FloatValue(float32(f)), 4, err
	case pqFloat64:
		f, err := toFloat(v)
		return parquet.DoubleValue(f), 8, err
	case pqString:
		s, err := parseString(v)
		// the value points into the string, which is immutable
		return parquet.ByteArrayValue(unsafe.Slice(unsafe.StringData(s), len(s))), len(s) + 4, err
	case pqBinary:
		b, err := parseBinary(v)
		if _, ok := v.([]byte); ok {
			b = bytes.Clone(b) // the caller may reuse its slice
		}
		return parquet.ByteArrayValue(b), len(b) + 4, err
	case pqDate:
		d, err := parseDate(v)
		return parquet.Int32Value(d), 4, err
	default:
		us, err := parseTimestamp(v)
		return parquet.Int64Value(us), 8, err
	}
}

// sourceValue is a column's value as iceberg-go's transforms take it.
func (c *pqCol) sourceValue(v parquet.Value) any {
	if v.IsNull() {
		return nil
	}
	switch c.kind {
	case pqBool:
		return v.Boolean()
	case pqInt32:
		return v.Int32()
	case pqInt64:
		return v.Int64()
	case pqFloat32:
		return v.Float()
	case pqFloat64:
		return v.Double()
	case pqString:
		return string(v.ByteArray())
	case pqBinary:
		return bytes.Clone(v.ByteArray())
	case pqDate:
		return iceberg.Date(v.Int32())
	default:
		return iceberg.Timestamp(v.Int64())
	}
}

// partition returns the open file of w.row's partition, opening it for
// the partition's first row.
func (w *pqWriter) partition() (*pqPart, error) {
	p := w.p
	if len(p.parts) == 0 {
		if w.last == nil {
			part, err := w.newPart(nil, "")
			if err != nil {
				return nil, err
			}
			w.last = part
		}
		return w.last, nil
	}
	for i, f := range p.parts {
		w.tuple[i] = f.apply(p.cols[f.col].sourceValue(w.row[f.col]))
	}
	if w.last != nil && tupleEqual(w.last.tuple, w.tuple) {
		return w.last, nil
	}
	w.key = w.key[:0]
	for _, v := range w.tuple {
		w.key = appendKey(w.key, v)
	}
	part, ok := w.parts[string(w.key)]
	if !ok {
		var err error
		if part, err = w.newPart(append([]any(nil), w.tuple...), string(w.key)); err != nil {
			return nil, err
		}
	}
	w.last = part
	return part, nil
}

// newPart opens the data file of a partition: under the table's data
// location (the partition path, then a name with a fresh UUID: a retried
// attempt never overwrites nor reuses a file).
func (w *pqWriter) newPart(tuple []any, key string) (*pqPart, error) {
	p := w.p
	part := &pqPart{tuple: tuple, vals: make([][]parquet.Value, len(p.cols)), stats: make([]pqStats, len(p.cols))}
	if len(tuple) > 0 {
		part.values = make(map[int]any, len(tuple))
		var sb strings.Builder
		for i, f := range p.parts {
			part.values[f.id] = tuple[i]
			if i > 0 {
				sb.WriteByte('/')
			}
			sb.WriteString(f.escaped)
			sb.WriteByte('=')
			sb.WriteString(pathValue(f.field.Transform.ToHumanStrType(f.result, tuple[i])))
		}
		part.dir = sb.String()
	}
	if len(w.order) == 0 {
		w.id = uuid.New()
	}
	name := fmt.Sprintf("%05d-%d-%s-%05d.parquet", len(w.order), w.subtask, w.id, w.files)
	if part.dir != "" {
		name = part.dir + "/" + name
	}
	part.path = p.loc.NewDataLocation(name)
	f, err := p.fs.Create(part.path)
	if err != nil {
		return nil, fmt.Errorf("iceberg sink: create data file %s: %w", part.path, err)
	}
	w.files++
	part.f, part.cw = f, &countWriter{w: f}
	part.pw = parquet.NewGenericWriter[any](part.cw, p.schema, parquet.Compression(p.codec), parquet.PageBufferSize(p.pageBytes),
		parquet.CreatedBy("sluice", "", ""))
	for i := range part.vals {
		part.vals[i] = make([]parquet.Value, 0, pqBatch)
	}
	w.parts[key] = part
	w.order = append(w.order, part)
	return part, nil
}

// pathValue is a partition value in a data file's directory name: as
// Java's and iceberg-go's writers URL-encode it, but with '_' for '%'.
// The directory name carries no meaning (readers take the partition from
// the manifest), and a '%' escape would name two files: iceberg-go's
// file IO decodes the URL (file://…/s=%C3%BC/ writes the directory
// "s=ü"), PyIceberg and Java take it as it is (they read "s=%C3%BC").
func pathValue(human string) string {
	return strings.ReplaceAll(url.QueryEscape(human), "%", "_")
}

func tupleEqual(a, b []any) bool {
	for i := range a {
		x, y := a[i], b[i]
		if xb, ok := x.([]byte); ok {
			yb, ok := y.([]byte)
			if !ok || !bytes.Equal(xb, yb) {
				return false
			}
			continue
		}
		if _, ok := y.([]byte); ok {
			return false
		}
		if fx, ok := x.(float64); ok { // NaN equals NaN as a partition value
			fy, ok := y.(float64)
			if !ok || math.Float64bits(fx) != math.Float64bits(fy) && !(math.IsNaN(fx) && math.IsNaN(fy)) {
				return false
			}
			continue
		}
		if fx, ok := x.(float32); ok {
			fy, ok := y.(float32)
			if !ok || math.Float32bits(fx) != math.Float32bits(fy) && !(math.IsNaN(float64(fx)) && math.IsNaN(float64(fy))) {
				return false
			}
			continue
		}
		if x != y {
			return false
		}
	}
	return true
}

// appendKey appends a partition value to a map key: a type tag, then the
// value, length-prefixed for strings and bytes.
func appendKey(dst []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(dst, 'n')
	case string:
		dst = strconv.AppendInt(append(dst, 's'), int64(len(x)), 10)
		return append(append(dst, ':'), x...)
	case []byte:
		dst = strconv.AppendInt(append(dst, 'b'), int64(len(x)), 10)
		return append(append(dst, ':'), x...)
	case float64:
		if math.IsNaN(x) {
			x = math.NaN()
		}
		return strconv.AppendUint(append(dst, 'd'), math.Float64bits(x), 16)
	case float32:
		if math.IsNaN(float64(x)) {
			x = float32(math.NaN())
		}
		return strconv.AppendUint(append(dst, 'f'), uint64(math.Float32bits(x)), 16)
	}
	return fmt.Appendf(append(dst, 'v'), "%T=%v;", v, v)
}

// update adds v (with its levels; null has definition level 0 in an
// optional column) to the statistics.
func (s *pqStats) update(k pqKind, v parquet.Value) {
	if v.IsNull() {
		s.nulls++
		return
	}
	switch k {
	case pqBool:
		b := int64(0)
		if v.Boolean() {
			b = 1
		}
		s.int(b)
	case pqInt32, pqDate:
		s.int(int64(v.Int32()))
	case pqInt64, pqTimestamp:
		s.int(v.Int64())
	case pqFloat32:
		s.float(float64(v.Float()))
	case pqFloat64:
		s.float(v.Double())
	default:
		b := v.ByteArray()
		switch {
		case !s.has:
			s.loB, s.hiB, s.has = b, b, true
		case bytes.Compare(b, s.loB) < 0:
			s.loB = b
		case bytes.Compare(b, s.hiB) > 0:
			s.hiB = b
		}
	}
}

func (s *pqStats) int(n int64) {
	if !s.has {
		s.loI, s.hiI, s.has = n, n, true
		return
	}
	s.loI, s.hiI = min(s.loI, n), max(s.hiI, n)
}

func (s *pqStats) float(f float64) {
	if math.IsNaN(f) {
		s.nans++ // NaN is in no bound (Iceberg spec)
		return
	}
	if !s.has {
		s.loF, s.hiF, s.has = f, f, true
		return
	}
	// -0 sorts below +0 in bounds, as Java's Iceberg compares floats
	if f < s.loF || f == s.loF && math.Signbit(f) {
		s.loF = f
	}
	if f > s.hiF || f == s.hiF && !math.Signbit(f) {
		s.hiF = f
	}
}

// bounds returns the lower and upper bound of the statistics in Iceberg's
// single-value binary form; nil when there is none.
func (s *pqStats) bounds(k pqKind) (lo, hi []byte, err error) {
	if !s.has {
		return nil, nil, nil
	}
	lit := func(a, b iceberg.Literal) ([]byte, []byte, error) {
		lo, err := a.MarshalBinary()
		if err != nil {
			return nil, nil, err
		}
		if b == nil {
			return lo, nil, nil
		}
		hi, err := b.MarshalBinary()
		return lo, hi, err
	}
	switch k {
	case pqBool:
		return lit(iceberg.BoolLiteral(s.loI == 1), iceberg.BoolLiteral(s.hiI == 1))
	case pqInt32:
		return lit(iceberg.Int32Literal(s.loI), iceberg.Int32Literal(s.hiI))
	case pqInt64:
		return lit(iceberg.Int64Literal(s.loI), iceberg.Int64Literal(s.hiI))
	case pqDate:
		return lit(iceberg.DateLiteral(s.loI), iceberg.DateLiteral(s.hiI))
	case pqTimestamp:
		return lit(iceberg.TimestampLiteral(s.loI), iceberg.TimestampLiteral(s.hiI))
	case pqFloat32:
		return lit(iceberg.Float32Literal(s.loF), iceberg.Float32Literal(s.hiF))
	case pqFloat64:
		return lit(iceberg.Float64Literal(s.loF), iceberg.Float64Literal(s.hiF))
	case pqString:
		lo := truncateString(s.loB, pqTruncate)
		hi := upperString(s.hiB, pqTruncate)
		var hiLit iceberg.Literal
		if hi != nil {
			hiLit = iceberg.StringLiteral(hi)
		}
		return lit(iceberg.StringLiteral(lo), hiLit)
	default:
		lo := s.loB[:min(len(s.loB), pqTruncate)]
		hi := upperBinary(s.hiB, pqTruncate)
		var hiLit iceberg.Literal
		if hi != nil {
			hiLit = iceberg.BinaryLiteral(hi)
		}
		return lit(iceberg.BinaryLiteral(bytes.Clone(lo)), hiLit)
	}
}

// truncateString returns the first n code points of b.
func truncateString(b []byte, n int) []byte {
	i := 0
	for k := 0; k < n && i < len(b); k++ {
		_, size := utf8.DecodeRune(b[i:])
		i += size
	}
	return bytes.Clone(b[:i])
}

// upperString returns the smallest string of at most n code points that
// is at least b: b itself if it is short enough, else its first n code
// points with the last one incremented (carrying into the ones before);
// nil if there is none.
func upperString(b []byte, n int) []byte {
	t := truncateString(b, n)
	if len(t) == len(b) {
		return t
	}
	runes := []rune(string(t))
	for i := len(runes) - 1; i >= 0; i-- {
		r := runes[i] + 1
		if r >= 0xD800 && r <= 0xDFFF { // skip the surrogates
			r = 0xE000
		}
		if r <= utf8.MaxRune {
			runes[i] = r
			return []byte(string(runes[:i+1]))
		}
	}
	return nil
}

// upperBinary is upperString for bytes.
func upperBinary(b []byte, n int) []byte {
	if len(b) <= n {
		return bytes.Clone(b)
	}
	t := bytes.Clone(b[:n])
	for i := len(t) - 1; i >= 0; i-- {
		if t[i] < 0xff {
			t[i]++
			return t[:i+1]
		}
	}
	return nil
}

// write ends every partition's file and describes them.
func (w *pqWriter) write(ctx context.Context, _ int) ([]fileDesc, error) {
	if w.rows == 0 {
		return nil, nil
	}
	var out []fileDesc
	var errs []error
	for _, part := range w.order {
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		d, err := w.p.finish(part)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	w.release() // the files left open after an error
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("parquet-go writer: %w", err)
	}
	return out, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeBatch writes the staged rows of part column by column, and ends
// the row group when it reached the table's row group size.
func (p *pqPlan) writeBatch(part *pqPart) error {
	if part.staged == 0 {
		return nil
	}
	for leaf, colw := range part.pw.ColumnWriters() {
		if _, err := colw.WriteRowValues(part.vals[leaf]); err != nil {
			return fmt.Errorf("iceberg sink: write %s, column %s: %w", part.path, p.schema.Columns()[leaf][0], err)
		}
		clear(part.vals[leaf]) // no references to the rows' strings
		part.vals[leaf] = part.vals[leaf][:0]
	}
	part.groupBytes += part.bytes * int64(part.staged) / int64(part.rows)
	part.staged = 0
	if part.groupBytes >= p.rowGroupBytes {
		part.groupBytes = 0
		if err := part.pw.Flush(); err != nil {
			return fmt.Errorf("iceberg sink: write %s: row group: %w", part.path, err)
		}
	}
	return nil
}

// finish ends part's file and describes it: counts and bounds from the
// statistics of the values written, column sizes and split offsets from
// the file's footer.
func (p *pqPlan) finish(part *pqPart) (d fileDesc, err error) {
	path := part.path
	if err := p.writeBatch(part); err != nil {
		return d, err
	}
	if err := part.pw.Close(); err != nil {
		return d, fmt.Errorf("write %s: %w", path, err)
	}
	f := part.f
	part.f = nil
	if err := f.Close(); err != nil {
		_ = p.fs.Remove(path)
		return d, fmt.Errorf("close %s: %w", path, err)
	}
	d = fileDesc{Path: path, Records: int64(part.rows), Size: part.cw.n, SpecID: p.spec.ID(),
		ColumnSizes: map[int]int64{}, ValueCounts: map[int]int64{}, NullCounts: map[int]int64{},
		LowerBounds: map[int][]byte{}, UpperBounds: map[int][]byte{}}
	meta := part.pw.File().Metadata()
	for _, rg := range meta.RowGroups {
		if len(rg.Columns) == 0 {
			continue
		}
		c0 := rg.Columns[0].MetaData
		off := c0.DataPageOffset
		if c0.DictionaryPageOffset > 0 && c0.DictionaryPageOffset < off {
			off = c0.DictionaryPageOffset
		}
		d.SplitOffsets = append(d.SplitOffsets, off)
		for leaf, cc := range rg.Columns {
			c := p.cols[p.byName[p.schema.Columns()[leaf][0]]]
			d.ColumnSizes[c.id] += cc.MetaData.TotalCompressedSize
		}
	}
	for i, c := range p.cols {
		st := &part.stats[i]
		d.ValueCounts[c.id] = int64(part.rows)
		d.NullCounts[c.id] = st.nulls
		if c.kind == pqFloat32 || c.kind == pqFloat64 {
			if d.NaNCounts == nil {
				d.NaNCounts = map[int]int64{}
			}
			d.NaNCounts[c.id] = st.nans
		}
		lo, hi, err := st.bounds(c.kind)
		if err != nil {
			return d, fmt.Errorf("file %s: bounds of column %s: %w", path, c.name, err)
		}
		if lo != nil {
			d.LowerBounds[c.id] = lo
		}
		if hi != nil {
			d.UpperBounds[c.id] = hi
		}
	}
	if len(part.tuple) > 0 {
		d.Partition = make(map[int]partValue, len(part.values))
		for id, v := range part.values {
			pv, err := encodePartValue(v)
			if err != nil {
				return d, fmt.Errorf("data file %s: partition field %d: %w", path, id, err)
			}
			d.Partition[id] = pv
		}
	}
	return d, nil
}
