package file

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// ParquetFile is the source format of Parquet files: each row of any
// Parquet file is read as a map[string]any in the value contract of CLI
// pipelines (see [AvroFile]):
//
//	BOOLEAN → bool; INT32, INT64 (also INT(8…64) annotations) → int64
//	  (UINT64 above math.MaxInt64 → json.Number);
//	FLOAT, DOUBLE → float64 (FLOAT as in [AvroFile]); STRING, ENUM, JSON → string; UUID → string;
//	other BYTE_ARRAY and FIXED_LEN_BYTE_ARRAY → []byte;
//	DECIMAL → json.Number, exact; DATE, TIMESTAMP, INT96 → time.Time (UTC);
//	TIME → int64 (in its unit); LIST and repeated fields → []any;
//	MAP → map[string]any (keys formatted as text); group → map[string]any;
//	a null optional column → nil.
//
// Files are not splittable. The offset of a record is the index of the
// row after it, so a reader resumes by seeking to a row (for Parquet the
// positions in the source's state and errors are row numbers, not byte
// offsets). Parquet files must not be compressed as a whole (.gz, .zst):
// their pages are. A file that is not Parquet or is corrupt fails the
// reader with a [*RecordError] naming the file and the row it was at.
func ParquetFile() Format[map[string]any] { return parquetFile{} }

type parquetFile struct{}

func (parquetFile) Splittable() bool { return false }

func (parquetFile) NewReader(io.Reader, int64) (RecordReader[map[string]any], error) {
	return nil, errors.New("file: a Parquet file needs random access: it must not be compressed as a whole (its pages are compressed)")
}

// parquetReadBatch is how many rows a reader reads at once.
const parquetReadBatch = 256

func (parquetFile) NewReaderAt(r io.ReaderAt, size, offset, skip int64) (_ RecordReader[map[string]any], err error) {
	defer func() {
		// parquet-go panics on some corrupt metadata.
		if p := recover(); p != nil {
			err = fmt.Errorf("file: corrupt Parquet file (%d bytes): %v", size, p)
		}
	}()
	// parquet-go allocates the footer's length before checking it
	// against the file's size.
	var tail [8]byte
	if size < 12 {
		return nil, fmt.Errorf("file: not a Parquet file: %d bytes", size)
	}
	if _, err := r.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("file: Parquet footer: %w", err)
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("file: not a readable Parquet file (%d bytes): no PAR1 magic at its end", size)
	}
	if n := int64(binary.LittleEndian.Uint32(tail[:4])); n > size-12 {
		return nil, fmt.Errorf("file: not a readable Parquet file (%d bytes): a footer of %d bytes", size, n)
	}
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("file: not a readable Parquet file (%d bytes): %w", size, err)
	}
	root, err := pqReadNodeOf(f.Schema(), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("file: Parquet schema: %w", err)
	}
	row := offset + skip
	pr := parquet.NewGenericReader[any](f, f.Schema())
	if row > 0 {
		if row > pr.NumRows() {
			return nil, fmt.Errorf("file: Parquet: resume at row %d of a file of %d rows", row, pr.NumRows())
		}
		if err := pr.SeekToRow(row); err != nil {
			return nil, fmt.Errorf("file: Parquet: seek to row %d: %w", row, err)
		}
	}
	return &parquetReader{r: pr, root: root, row: row, cols: make([][]parquet.Value, len(f.Schema().Columns()))}, nil
}

type parquetReader struct {
	r    *parquet.GenericReader[any]
	root *pqReadNode
	row  int64 // index of the next row
	buf  []parquet.Row
	n, i int // rows in buf, next in buf
	cols [][]parquet.Value
	done bool
}

func (p *parquetReader) Read() (map[string]any, int64, error) {
	if p.i == p.n {
		if p.done {
			return nil, p.row, io.EOF
		}
		if p.buf == nil {
			p.buf = make([]parquet.Row, parquetReadBatch)
		}
		n, err := p.readRows()
		p.n, p.i = n, 0
		switch {
		case errors.Is(err, io.EOF):
			p.done = true
			if n == 0 {
				return nil, p.row, io.EOF
			}
		case err != nil:
			return nil, p.row, fmt.Errorf("file: Parquet: corrupt data at row %d: %w", p.row, err)
		}
	}
	row := p.buf[p.i]
	p.i++
	for i := range p.cols {
		p.cols[i] = p.cols[i][:0]
	}
	for _, v := range row {
		c := v.Column()
		if c < 0 || c >= len(p.cols) {
			return nil, p.row, fmt.Errorf("file: Parquet: corrupt row %d: column %d", p.row, c)
		}
		p.cols[c] = append(p.cols[c], v)
	}
	v, err := p.root.assemble(p.cols, 0, 0)
	if err != nil {
		return nil, p.row, fmt.Errorf("file: Parquet: corrupt row %d: %w", p.row, err)
	}
	p.row++
	m, _ := v.(map[string]any)
	return m, p.row, nil
}

// readRows reads the next batch, turning a panic of the decoder on corrupt
// data into an error.
func (p *parquetReader) readRows() (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder: %v", r)
		}
	}()
	return p.r.ReadRows(p.buf)
}

// pqReadNode is a node of a file's schema with what assembly needs.
type pqReadNode struct {
	name     string
	optional bool
	repeated bool
	leaf     bool
	col      int // first leaf column
	ncols    int // leaf columns under the node
	fields   []*pqReadNode
	list     bool // a LIST group: its value is its repeated child's elements
	mapped   bool // a MAP group
	node     parquet.Node
}

func pqReadNodeOf(n parquet.Node, col, depth int) (*pqReadNode, error) {
	if depth > 64 {
		return nil, errors.New("nested more than 64 levels")
	}
	r := &pqReadNode{optional: n.Optional(), repeated: n.Repeated(), leaf: n.Leaf(), col: col, node: n}
	if n.Leaf() {
		r.ncols = 1
		return r, nil
	}
	if lt := n.Type().LogicalType(); lt != nil {
		switch lt.Value.(type) {
		case *format.ListType:
			r.list = true
		case *format.MapType:
			r.mapped = true
		}
	}
	if ct := n.Type().ConvertedType(); ct != nil {
		switch *ct {
		case deprecated.List:
			r.list = true
		case deprecated.Map, deprecated.MapKeyValue:
			r.mapped = true
		}
	}
	for _, f := range n.Fields() {
		c, err := pqReadNodeOf(f, col+r.ncols, depth+1)
		if err != nil {
			return nil, err
		}
		c.name = f.Name()
		r.fields = append(r.fields, c)
		r.ncols += c.ncols
	}
	if (r.list || r.mapped) && (len(r.fields) != 1 || !r.fields[0].repeated) {
		r.list, r.mapped = false, false // not the standard layout: a plain group
	}
	return r, nil
}

// assemble builds the value of node n from the values of its leaf columns
// (cols[n.col : n.col+n.ncols], each holding this instance's values); def
// is the definition level of its parent, rep the repetition depth.
func (n *pqReadNode) assemble(cols [][]parquet.Value, rep, def int) (any, error) {
	first := cols[n.col]
	if len(first) == 0 {
		return nil, fmt.Errorf("column %d: no value", n.col)
	}
	if n.repeated {
		return n.assembleRepeated(cols, rep, def)
	}
	if n.optional {
		if first[0].DefinitionLevel() <= def {
			return nil, nil
		}
		def++
	}
	return n.assembleOne(cols, rep, def)
}

// assembleOne builds the value of n, present at definition level def.
func (n *pqReadNode) assembleOne(cols [][]parquet.Value, rep, def int) (any, error) {
	if n.leaf {
		return pqLeafValue(n.node, cols[n.col][0])
	}
	if n.list || n.mapped {
		v, err := n.fields[0].assemble(cols, rep, def)
		if err != nil {
			return nil, err
		}
		elems, _ := v.([]any)
		if n.list {
			return elems, nil
		}
		m := make(map[string]any, len(elems))
		for _, e := range elems {
			kv, _ := e.(map[string]any)
			m[mapKey(kv["key"])] = kv["value"]
		}
		return m, nil
	}
	m := make(map[string]any, len(n.fields))
	for _, f := range n.fields {
		v, err := f.assemble(cols, rep, def)
		if err != nil {
			return nil, err
		}
		m[f.name] = v
	}
	return m, nil
}

// assembleRepeated builds the elements of a repeated node; the elements of
// a repeated group with one field (the standard LIST layout) are that
// field's values.
func (n *pqReadNode) assembleRepeated(cols [][]parquet.Value, rep, def int) (any, error) {
	first := cols[n.col]
	if first[0].DefinitionLevel() <= def {
		return []any{}, nil
	}
	def++
	rep++
	// Cut every column of the node at the values that start an element.
	sub := make([][]parquet.Value, len(cols))
	starts := make([][]int, n.ncols)
	count := -1
	for c := range n.ncols {
		vs := cols[n.col+c]
		for i, v := range vs {
			if i == 0 || v.RepetitionLevel() == rep {
				starts[c] = append(starts[c], i)
			} else if v.RepetitionLevel() < rep {
				return nil, fmt.Errorf("column %d: repetition level %d inside a list at level %d", n.col+c, v.RepetitionLevel(), rep)
			}
		}
		if count >= 0 && len(starts[c]) != count {
			return nil, fmt.Errorf("column %d: %d list elements, column %d has %d", n.col+c, len(starts[c]), n.col, count)
		}
		count = len(starts[c])
	}
	elems := make([]any, 0, count)
	unwrap := !n.leaf && len(n.fields) == 1
	for e := range count {
		for c := range n.ncols {
			vs := cols[n.col+c]
			end := len(vs)
			if e+1 < count {
				end = starts[c][e+1]
			}
			sub[n.col+c] = vs[starts[c][e]:end]
		}
		v, err := n.assembleOne(sub, rep, def)
		if err != nil {
			return nil, err
		}
		if unwrap {
			v = v.(map[string]any)[n.fields[0].name]
		}
		elems = append(elems, v)
	}
	return elems, nil
}

func mapKey(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case nil:
		return ""
	}
	return fmt.Sprint(k)
}

// pqLeafValue converts a leaf value to the value contract.
func pqLeafValue(n parquet.Node, v parquet.Value) (any, error) {
	if v.IsNull() {
		return nil, nil
	}
	t := n.Type()
	var lt format.LogicalTypeValue
	if l := t.LogicalType(); l != nil {
		lt = l.Value
	}
	var ct deprecated.ConvertedType = -1
	if c := t.ConvertedType(); c != nil {
		ct = *c
	}
	if d, ok := lt.(*format.DecimalType); ok {
		return pqDecimal(v, int(d.Scale))
	}
	if ct == deprecated.Decimal {
		// Legacy files: the scale is in the schema element, which
		// parquet-go exposes through the logical type too; without it
		// the unscaled value is given.
		return pqDecimal(v, 0)
	}
	switch v.Kind() {
	case parquet.Boolean:
		return v.Boolean(), nil
	case parquet.Int32:
		i := v.Int32()
		switch x := lt.(type) {
		case *format.DateType:
			return time.Unix(int64(i)*86400, 0).UTC(), nil
		case *format.IntType:
			if !x.IsSigned {
				return int64(uint32(i)), nil
			}
		}
		switch ct {
		case deprecated.Date:
			return time.Unix(int64(i)*86400, 0).UTC(), nil
		case deprecated.Uint8, deprecated.Uint16, deprecated.Uint32:
			return int64(uint32(i)), nil
		}
		return int64(i), nil
	case parquet.Int64:
		i := v.Int64()
		switch x := lt.(type) {
		case *format.TimestampType:
			switch x.Unit.Value.(type) {
			case *format.MilliSeconds:
				return time.UnixMilli(i).UTC(), nil
			case *format.MicroSeconds:
				return time.UnixMicro(i).UTC(), nil
			case *format.NanoSeconds:
				return time.Unix(0, i).UTC(), nil
			}
		case *format.IntType:
			if !x.IsSigned && i < 0 {
				return json.Number(strconv.FormatUint(uint64(i), 10)), nil
			}
		}
		switch ct {
		case deprecated.TimestampMillis:
			return time.UnixMilli(i).UTC(), nil
		case deprecated.TimestampMicros:
			return time.UnixMicro(i).UTC(), nil
		case deprecated.Uint64:
			if i < 0 {
				return json.Number(strconv.FormatUint(uint64(i), 10)), nil
			}
		}
		return i, nil
	case parquet.Int96:
		b := v.Bytes()
		if len(b) != 12 {
			return nil, fmt.Errorf("INT96 of %d bytes", len(b))
		}
		nanos := int64(binary.LittleEndian.Uint64(b[:8]))
		day := int64(binary.LittleEndian.Uint32(b[8:]))
		return time.Unix((day-2440588)*86400, nanos).UTC(), nil
	case parquet.Float:
		return float32to64(v.Float()), nil
	case parquet.Double:
		return v.Double(), nil
	case parquet.ByteArray, parquet.FixedLenByteArray:
		b := v.ByteArray()
		switch lt.(type) {
		case *format.StringType, *format.EnumType, *format.JsonType:
			return string(b), nil
		case *format.UUIDType:
			if len(b) == 16 {
				return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
			}
		}
		switch ct {
		case deprecated.UTF8, deprecated.Enum, deprecated.Json:
			return string(b), nil
		}
		return append([]byte(nil), b...), nil
	}
	return nil, fmt.Errorf("unsupported Parquet type %s", t)
}

func pqDecimal(v parquet.Value, scale int) (any, error) {
	var n *big.Int
	switch v.Kind() {
	case parquet.Int32:
		n = big.NewInt(int64(v.Int32()))
	case parquet.Int64:
		n = big.NewInt(v.Int64())
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return decimalNumber(v.ByteArray(), scale), nil
	default:
		return nil, fmt.Errorf("DECIMAL of physical type %s", v.Kind())
	}
	return json.Number(formatUnscaled(n, scale)), nil
}
