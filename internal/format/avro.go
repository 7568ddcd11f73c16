package format

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

func init() {
	prev := registerMore
	registerMore = func(f *Formats) {
		prev(f)
		f.Register("avro", newAvro)
	}
}

// avroCodec reads and writes Avro binary in the Confluent wire format.
// Schemas are parsed with hamba/avro; the binary encoding is done here,
// walking the schema, so that values follow the package's value contract
// and errors name the field path.
type avroCodec struct {
	reg      *registry[avro.Schema]
	fullName string // of the configured schema, for the record strategies
}

func newAvro(c Config) (Codec, error) {
	reg, err := newRegistry("avro", c, sr.TypeAvro, parseAvro)
	if err != nil {
		return nil, err
	}
	ac := &avroCodec{reg: reg}
	if c.Registry.Schema != "" {
		s, err := parseAvro(context.Background(), sr.Schema{Schema: c.Registry.Schema}, nil)
		if err != nil {
			return nil, fmt.Errorf("avro format: the configured schema: %w", err)
		}
		if n, ok := s.(avro.NamedSchema); ok {
			ac.fullName = n.FullName()
		}
	}
	return ac, nil
}

// parseAvro parses a schema with its references (named types other
// subjects define), each in a fresh cache: versions of one record name
// must not see each other.
func parseAvro(_ context.Context, s sr.Schema, refs map[string]string) (avro.Schema, error) {
	cache := &avro.SchemaCache{}
	// References may depend on each other: parse them in rounds until
	// every one parses (at most len(refs) rounds).
	pending := make([]string, 0, len(refs))
	for name := range refs {
		pending = append(pending, name)
	}
	slices.Sort(pending)
	for round := 0; len(pending) > 0; round++ {
		var failed []string
		var lastErr error
		for _, name := range pending {
			if _, err := avro.ParseWithCache(refs[name], "", cache); err != nil {
				failed, lastErr = append(failed, name), err
			}
		}
		if len(failed) == len(pending) || round > len(refs) {
			return nil, fmt.Errorf("referenced schema %q: %w", failed[0], lastErr)
		}
		pending = failed
	}
	schema, err := avro.ParseWithCache(s.Schema, "", cache)
	if err != nil {
		return nil, fmt.Errorf("invalid Avro schema: %w", err)
	}
	return schema, nil
}

func (c *avroCodec) Decode(ctx context.Context, _ string, b []byte) (any, error) {
	id, payload, err := splitWire(b)
	if err != nil {
		return nil, fmt.Errorf("avro format: %w", err)
	}
	s, err := c.reg.schemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("avro format: %w", err)
	}
	r := avroReader{b: payload}
	v, err := r.read(s, "")
	if err != nil {
		return nil, fmt.Errorf("avro format: schema id %d: %w", id, err)
	}
	if r.i != len(r.b) {
		return nil, fmt.Errorf("avro format: schema id %d: %d bytes left after the value", id, len(r.b)-r.i)
	}
	return v, nil
}

func (c *avroCodec) Encode(ctx context.Context, topic string, dst []byte, v any) ([]byte, error) {
	id, s, err := c.reg.writerFor(ctx, topic, c.fullName)
	if err != nil {
		return nil, fmt.Errorf("avro format: %w", err)
	}
	out, err := avroWrite(appendWire(dst, id), s, v, "")
	if err != nil {
		return nil, fmt.Errorf("avro format: schema id %d: %w", id, err)
	}
	return out, nil
}

// Identity is "": a writer looks its own schema up, so bytes never pass
// through unchanged.
func (c *avroCodec) Identity() string { return "" }

// fieldErr names the field path of an error ("the value" at the top).
func fieldErr(path, format string, args ...any) error {
	where := "the value"
	if path != "" {
		where = "field " + path
	}
	return fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// maxBlock bounds the item count of one array or map block, so that a
// corrupt count cannot make the reader allocate without bound.
const maxBlock = 1 << 24

type avroReader struct {
	b     []byte
	i     int
	items int // array items and map entries read so far
}

// maxZeroSizeItems bounds how many more array items and map entries than
// input bytes a value may hold: items of a zero-size type (null, an empty
// record) take no bytes, so a short corrupt record could otherwise claim
// billions of them.
const maxZeroSizeItems = 1 << 16

func (r *avroReader) countItems(n int, path string) error {
	r.items += n
	if r.items > len(r.b)+maxZeroSizeItems {
		return fieldErr(path, "more than %d list items or map entries in a %d-byte record", len(r.b)+maxZeroSizeItems, len(r.b))
	}
	return nil
}

func (r *avroReader) long(path string) (int64, error) {
	x, n := binary.Varint(r.b[r.i:])
	if n <= 0 {
		return 0, fieldErr(path, "truncated or invalid varint at byte %d", r.i)
	}
	r.i += n
	return x, nil
}

func (r *avroReader) bytes(path string) ([]byte, error) {
	n, err := r.long(path)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.b)-r.i) {
		return nil, fieldErr(path, "length %d beyond the %d bytes left", n, len(r.b)-r.i)
	}
	b := r.b[r.i : r.i+int(n)]
	r.i += int(n)
	return b, nil
}

func (r *avroReader) fixed(path string, n int) ([]byte, error) {
	if n > len(r.b)-r.i {
		return nil, fieldErr(path, "%d fixed bytes beyond the %d bytes left", n, len(r.b)-r.i)
	}
	b := r.b[r.i : r.i+n]
	r.i += n
	return b, nil
}

// blockCount reads an array or map block header (a negative count is
// followed by the block's byte size, which is skipped).
func (r *avroReader) blockCount(path string) (int, error) {
	n, err := r.long(path)
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, fieldErr(path, "invalid block count")
		}
		n = -n
		if _, err := r.long(path); err != nil {
			return 0, err
		}
	}
	if n > maxBlock {
		return 0, fieldErr(path, "block of %d items beyond the input", n)
	}
	return int(n), r.countItems(int(n), path)
}

func logicalOf(s avro.Schema) avro.LogicalSchema {
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return l.Logical()
	}
	return nil
}

func (r *avroReader) read(s avro.Schema, path string) (any, error) {
	switch s.Type() {
	case avro.Ref:
		return r.read(s.(*avro.RefSchema).Schema(), path)
	case avro.Null:
		return nil, nil
	case avro.Boolean:
		b, err := r.fixed(path, 1)
		if err != nil {
			return nil, err
		}
		if b[0] > 1 {
			return nil, fieldErr(path, "invalid boolean byte 0x%02x", b[0])
		}
		return b[0] == 1, nil
	case avro.Int, avro.Long:
		x, err := r.long(path)
		if err != nil {
			return nil, err
		}
		if s.Type() == avro.Int && (x < math.MinInt32 || x > math.MaxInt32) {
			return nil, fieldErr(path, "int %d out of range", x)
		}
		if l := logicalOf(s); l != nil {
			switch l.Type() {
			case avro.Date:
				return time.Unix(x*86400, 0).UTC(), nil
			case avro.TimestampMillis, avro.LocalTimestampMillis:
				return time.UnixMilli(x).UTC(), nil
			case avro.TimestampMicros, avro.LocalTimestampMicros:
				return time.UnixMicro(x).UTC(), nil
			}
		}
		return x, nil
	case avro.Float:
		b, err := r.fixed(path, 4)
		if err != nil {
			return nil, err
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(b))
		// The float64 that prints as the float32 does: 0.1, not
		// 0.10000000149011612 (it converts back to the same float32).
		f64, _ := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
		return f64, nil
	case avro.Double:
		b, err := r.fixed(path, 8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case avro.String:
		b, err := r.bytes(path)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(b) {
			return nil, fieldErr(path, "string is not UTF-8")
		}
		return string(b), nil
	case avro.Bytes, avro.Fixed:
		var b []byte
		var err error
		if fs, ok := s.(*avro.FixedSchema); ok {
			b, err = r.fixed(path, fs.Size())
		} else {
			b, err = r.bytes(path)
		}
		if err != nil {
			return nil, err
		}
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			return decimalNumber(b, d.Scale()), nil
		}
		return slices.Clone(b), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		x, err := r.long(path)
		if err != nil {
			return nil, err
		}
		if x < 0 || x >= int64(len(es.Symbols())) {
			return nil, fieldErr(path, "enum index %d out of range (%d symbols)", x, len(es.Symbols()))
		}
		return es.Symbols()[x], nil
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		out := []any{}
		for {
			n, err := r.blockCount(path)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			for range n {
				v, err := r.read(items, fmt.Sprintf("%s[%d]", path, len(out)))
				if err != nil {
					return nil, err
				}
				out = append(out, v)
			}
		}
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		out := map[string]any{}
		for {
			n, err := r.blockCount(path)
			if err != nil {
				return nil, err
			}
			if n == 0 {
				return out, nil
			}
			for range n {
				k, err := r.bytes(path)
				if err != nil {
					return nil, err
				}
				v, err := r.read(values, joinPath(path, string(k)))
				if err != nil {
					return nil, err
				}
				out[string(k)] = v
			}
		}
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		x, err := r.long(path)
		if err != nil {
			return nil, err
		}
		if x < 0 || x >= int64(len(types)) {
			return nil, fieldErr(path, "union branch %d out of range (%d branches)", x, len(types))
		}
		return r.read(types[x], path)
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		out := make(map[string]any, len(rs.Fields()))
		for _, f := range rs.Fields() {
			v, err := r.read(f.Type(), joinPath(path, f.Name()))
			if err != nil {
				return nil, err
			}
			out[f.Name()] = v
		}
		return out, nil
	}
	return nil, fieldErr(path, "unsupported Avro type %s", s.Type())
}

// decimalNumber renders a big-endian two's-complement unscaled integer
// with a scale as an exact JSON number.
func decimalNumber(b []byte, scale int) json.Number {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	s := n.String()
	if scale <= 0 {
		return json.Number(s)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	if neg {
		s = "-" + s
	}
	return json.Number(s)
}

// avroWrite appends the Avro binary encoding of v under schema s.
func avroWrite(dst []byte, s avro.Schema, v any, path string) ([]byte, error) {
	switch s.Type() {
	case avro.Ref:
		return avroWrite(dst, s.(*avro.RefSchema).Schema(), v, path)
	case avro.Null:
		if v != nil {
			return nil, fieldErr(path, "want null, got %s", aKind(v))
		}
		return dst, nil
	case avro.Boolean:
		b, err := toBool(v, path)
		if err != nil {
			return nil, err
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case avro.Int, avro.Long:
		x, err := avroInteger(s, v, path)
		if err != nil {
			return nil, err
		}
		return binary.AppendVarint(dst, x), nil
	case avro.Float:
		f, err := toFloat(v, path, 24)
		if err != nil {
			return nil, err
		}
		if !math.IsInf(f, 0) && math.Abs(f) > math.MaxFloat32 {
			return nil, fieldErr(path, "%v out of float range", f)
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case avro.Double:
		f, err := toFloat(v, path, 53)
		if err != nil {
			return nil, err
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case avro.String:
		var str string
		switch x := v.(type) {
		case string:
			str = x
		case []byte:
			if !utf8.Valid(x) {
				return nil, fieldErr(path, "bytes that are not UTF-8 cannot be a string")
			}
			str = string(x)
		default:
			return nil, fieldErr(path, "want a string, got %s", aKind(v))
		}
		dst = binary.AppendVarint(dst, int64(len(str)))
		return append(dst, str...), nil
	case avro.Bytes, avro.Fixed:
		var b []byte
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			var err error
			if b, err = decimalBytes(v, d, path); err != nil {
				return nil, err
			}
		} else {
			switch x := v.(type) {
			case []byte:
				b = x
			case string:
				b = []byte(x)
			default:
				rv := reflect.ValueOf(v)
				if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
					return nil, fieldErr(path, "want bytes, got %s", aKind(v))
				}
				b = make([]byte, rv.Len())
				reflect.Copy(reflect.ValueOf(b), rv)
			}
		}
		if fs, ok := s.(*avro.FixedSchema); ok {
			if len(b) > fs.Size() {
				return nil, fieldErr(path, "%d bytes for a fixed of %d", len(b), fs.Size())
			}
			if len(b) < fs.Size() {
				if _, dec := logicalOf(s).(*avro.DecimalLogicalSchema); !dec {
					return nil, fieldErr(path, "%d bytes for a fixed of %d", len(b), fs.Size())
				}
				b = signExtend(b, fs.Size())
			}
			return append(dst, b...), nil
		}
		dst = binary.AppendVarint(dst, int64(len(b)))
		return append(dst, b...), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		str, ok := v.(string)
		if !ok {
			return nil, fieldErr(path, "want one of the symbols %q, got %s", es.Symbols(), aKind(v))
		}
		i := slices.Index(es.Symbols(), str)
		if i < 0 {
			return nil, fieldErr(path, "%q is not one of the symbols %q", str, es.Symbols())
		}
		return binary.AppendVarint(dst, int64(i)), nil
	case avro.Array:
		l, ok := v.([]any)
		if !ok {
			return nil, fieldErr(path, "want a list, got %s", aKind(v))
		}
		items := s.(*avro.ArraySchema).Items()
		if len(l) > 0 {
			dst = binary.AppendVarint(dst, int64(len(l)))
			for i, x := range l {
				var err error
				if dst, err = avroWrite(dst, items, x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return nil, err
				}
			}
		}
		return append(dst, 0), nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fieldErr(path, "want an object, got %s", aKind(v))
		}
		values := s.(*avro.MapSchema).Values()
		if len(m) > 0 {
			dst = binary.AppendVarint(dst, int64(len(m)))
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				dst = binary.AppendVarint(dst, int64(len(k)))
				dst = append(dst, k...)
				var err error
				if dst, err = avroWrite(dst, values, m[k], joinPath(path, k)); err != nil {
					return nil, err
				}
			}
		}
		return append(dst, 0), nil
	case avro.Union:
		return writeUnion(dst, s.(*avro.UnionSchema), v, path)
	case avro.Record:
		rs := s.(*avro.RecordSchema)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fieldErr(path, "want an object (record %s), got %s", rs.FullName(), aKind(v))
		}
		for k := range m {
			if !slices.ContainsFunc(rs.Fields(), func(f *avro.Field) bool { return f.Name() == k }) {
				return nil, fieldErr(joinPath(path, k), "not in the schema of record %s", rs.FullName())
			}
		}
		for _, f := range rs.Fields() {
			fp := joinPath(path, f.Name())
			x, ok := m[f.Name()]
			var err error
			switch {
			case ok:
				dst, err = avroWrite(dst, f.Type(), x, fp)
			case f.HasDefault():
				dst, err = writeDefault(dst, f.Type(), f.Default(), fp)
			default:
				err = fieldErr(fp, "missing, and the schema gives no default")
			}
			if err != nil {
				return nil, err
			}
		}
		return dst, nil
	}
	return nil, fieldErr(path, "unsupported Avro type %s", s.Type())
}

// writeDefault writes a field's default: for a union, of its first
// branch (the Avro rule).
func writeDefault(dst []byte, s avro.Schema, def any, path string) ([]byte, error) {
	if u, ok := s.(*avro.UnionSchema); ok {
		dst = binary.AppendVarint(dst, 0)
		s = u.Types()[0]
	}
	switch x := def.(type) {
	case int:
		def = int64(x)
	case float32:
		def = float64(x)
	}
	return avroWrite(dst, s, def, path)
}

// writeUnion picks the branch by the value's kind: null for nil, then the
// branch of the value's own type, then the first branch that takes it.
func writeUnion(dst []byte, u *avro.UnionSchema, v any, path string) ([]byte, error) {
	types := u.Types()
	order := make([]int, 0, len(types))
	for i, t := range types {
		if naturalBranch(t, v) {
			order = append(order, i)
		}
	}
	for i := range types {
		if !slices.Contains(order, i) {
			order = append(order, i)
		}
	}
	var firstErr error
	for _, i := range order {
		out, err := avroWrite(binary.AppendVarint(dst, int64(i)), types[i], v, path)
		if err == nil {
			return out, nil
		}
		if firstErr == nil && naturalBranch(types[i], v) {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = branchName(t)
	}
	return nil, fieldErr(path, "%s fits no branch of the union [%s]", aKind(v), strings.Join(names, ", "))
}

func branchName(t avro.Schema) string {
	if r, ok := t.(*avro.RefSchema); ok {
		t = r.Schema()
	}
	if n, ok := t.(avro.NamedSchema); ok {
		return n.FullName()
	}
	if l := logicalOf(t); l != nil {
		return string(t.Type()) + "/" + string(l.Type())
	}
	return string(t.Type())
}

// naturalBranch reports whether t is the branch a value of v's kind
// belongs to first.
func naturalBranch(t avro.Schema, v any) bool {
	if r, ok := t.(*avro.RefSchema); ok {
		t = r.Schema()
	}
	l := logicalOf(t)
	switch v.(type) {
	case nil:
		return t.Type() == avro.Null
	case bool:
		return t.Type() == avro.Boolean
	case int64, int, int32:
		return (t.Type() == avro.Long || t.Type() == avro.Int) && l == nil
	case float64, float32:
		return t.Type() == avro.Double || t.Type() == avro.Float
	case json.Number:
		_, dec := l.(*avro.DecimalLogicalSchema)
		return dec || t.Type() == avro.Double
	case string:
		return t.Type() == avro.String || t.Type() == avro.Enum
	case []byte:
		return (t.Type() == avro.Bytes || t.Type() == avro.Fixed) && l == nil
	case time.Time:
		return l != nil && (l.Type() == avro.TimestampMillis || l.Type() == avro.TimestampMicros || l.Type() == avro.Date ||
			l.Type() == avro.LocalTimestampMillis || l.Type() == avro.LocalTimestampMicros)
	case []any:
		return t.Type() == avro.Array
	case map[string]any:
		return t.Type() == avro.Record || t.Type() == avro.Map
	}
	return false
}

// avroInteger converts a value to an int or long of schema s (with its
// logical type: dates and timestamps from time.Time or RFC 3339 strings).
func avroInteger(s avro.Schema, v any, path string) (int64, error) {
	if l := logicalOf(s); l != nil {
		var t time.Time
		var isTime bool
		switch x := v.(type) {
		case time.Time:
			t, isTime = x, true
		case string:
			var err error
			t, err = time.Parse(time.RFC3339Nano, x)
			if err != nil && l.Type() == avro.Date {
				t, err = time.Parse(time.DateOnly, x)
			}
			if err != nil {
				return 0, fieldErr(path, "%q is not an RFC 3339 time (%s)", x, l.Type())
			}
			isTime = true
		}
		if isTime {
			switch l.Type() {
			case avro.Date:
				return int64(math.Floor(float64(t.Unix()) / 86400)), nil
			case avro.TimestampMillis, avro.LocalTimestampMillis:
				return t.UnixMilli(), nil
			case avro.TimestampMicros, avro.LocalTimestampMicros:
				return t.UnixMicro(), nil
			}
			return 0, fieldErr(path, "a time cannot be a %s", l.Type())
		}
	}
	want := "a long"
	if s.Type() == avro.Int {
		want = "an int"
	}
	x, err := toInt64(v, path, want)
	if err != nil {
		return 0, err
	}
	if s.Type() == avro.Int && (x < math.MinInt32 || x > math.MaxInt32) {
		return 0, fieldErr(path, "%d is out of the int range", x)
	}
	return x, nil
}

// numberString returns the number a string holds in JSON syntax (text
// formats such as CSV hold numbers as strings).
func numberString(s string) (any, bool) {
	v, err := jsonrecord.Decode([]byte(s))
	if err != nil {
		return nil, false
	}
	switch v.(type) {
	case int64, float64, json.Number:
		return v, true
	}
	return nil, false
}

// toBool takes a bool, or the strings "true" and "false".
func toBool(v any, path string) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		switch x {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return false, fieldErr(path, "%q is not true or false", x)
	}
	return false, fieldErr(path, "want a boolean, got %s", aKind(v))
}

func toInt64(v any, path, want string) (int64, error) {
	if s, ok := v.(string); ok {
		n, ok := numberString(s)
		if !ok {
			return 0, fieldErr(path, "%q is not a number (want %s)", s, want)
		}
		v = n
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return int64(x), nil
		}
		return 0, fieldErr(path, "%v is not an integer (want %s)", x, want)
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		r, ok := new(big.Rat).SetString(string(x))
		if ok && r.IsInt() && r.Num().IsInt64() {
			return r.Num().Int64(), nil
		}
		return 0, fieldErr(path, "%s is not an integer that fits %s", x, want)
	}
	return 0, fieldErr(path, "want %s, got %s", want, aKind(v))
}

// toFloat converts a number to a float64; an integer must be exact in a
// mantissa of the given bits.
func toFloat(v any, path string, mantissa uint) (float64, error) {
	if s, ok := v.(string); ok {
		n, ok := numberString(s)
		if !ok {
			return 0, fieldErr(path, "%q is not a number", s)
		}
		v = n
	}
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int64, int, int32:
		i := reflect.ValueOf(x).Int()
		if i > 1<<mantissa || i < -(1<<mantissa) {
			return 0, fieldErr(path, "%d is not exact as a %d-bit float", i, map[uint]int{24: 32, 53: 64}[mantissa])
		}
		return float64(i), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, fieldErr(path, "%s: %v", x, errors.Unwrap(err))
		}
		return f, nil
	}
	return 0, fieldErr(path, "want a number, got %s", aKind(v))
}

// decimalBytes converts a number to the unscaled two's-complement bytes
// of a decimal; more fractional digits than the scale is an error.
func decimalBytes(v any, d *avro.DecimalLogicalSchema, path string) ([]byte, error) {
	var lit string
	switch x := v.(type) {
	case json.Number:
		lit = string(x)
	case string:
		lit = x
	case int64:
		lit = strconv.FormatInt(x, 10)
	case float64:
		lit = strconv.FormatFloat(x, 'f', -1, 64)
	case []byte:
		return x, nil
	default:
		return nil, fieldErr(path, "want a decimal number, got %s", aKind(v))
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return nil, fieldErr(path, "%q is not a decimal number", lit)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)))
	if !r.IsInt() {
		return nil, fieldErr(path, "%s has more than %d decimal places", lit, d.Scale())
	}
	n := r.Num()
	if len(strings.TrimPrefix(n.Text(10), "-")) > d.Precision() {
		return nil, fieldErr(path, "%s has more than %d digits (decimal(%d,%d))", lit, d.Precision(), d.Precision(), d.Scale())
	}
	return twosComplement(n), nil
}

func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n = 2^k - |n| for the smallest k that keeps the sign bit set.
	k := uint((n.BitLen()/8 + 1) * 8)
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), k), n)
	b := m.Bytes()
	for len(b) < int(k/8) {
		b = append([]byte{0}, b...)
	}
	for len(b) > 1 && b[0] == 0xff && b[1]&0x80 != 0 {
		b = b[1:]
	}
	return b
}

func signExtend(b []byte, size int) []byte {
	pad := byte(0)
	if len(b) > 0 && b[0]&0x80 != 0 {
		pad = 0xff
	}
	out := make([]byte, size)
	for i := range size - len(b) {
		out[i] = pad
	}
	copy(out[size-len(b):], b)
	return out
}
