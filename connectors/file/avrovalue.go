package file

import (
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

	"github.com/hamba/avro/v2"
)

// This file maps Avro data to the value contract of CLI pipelines and
// back: map[string]any for records, []any, string, bool, nil, int64,
// float64, json.Number (decimals), []byte, time.Time.

// errAvroValue is wrapped by the errors of values that do not fit the
// writer's Avro schema; the message names the field.
var errAvroValue = errors.New("value does not fit the Avro schema")

// parseAvroSchema parses an Avro schema with a cache of its own, so that
// named types of different files or formats never clash.
func parseAvroSchema(s string) (avro.Schema, error) {
	return avro.ParseWithCache(s, "", &avro.SchemaCache{})
}

func logicalOf(s avro.Schema) avro.LogicalSchema {
	if l, ok := s.(avro.LogicalTypeSchema); ok {
		return l.Logical()
	}
	return nil
}

func logicalTypeOf(s avro.Schema) avro.LogicalType {
	if l := logicalOf(s); l != nil {
		return l.Type()
	}
	return ""
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// maxAvroItems bounds the items of one array or map a reader accepts, so
// that a corrupt count of zero-size items cannot loop for ever.
const maxAvroItems = 1 << 24

// decodeAvro reads one value of schema s from r into the value contract.
func decodeAvro(r *avro.Reader, s avro.Schema) any {
	s = deref(s)
	switch s.Type() {
	case avro.Null:
		return nil
	case avro.Boolean:
		return r.ReadBool()
	case avro.Int:
		i := r.ReadInt()
		if logicalTypeOf(s) == avro.Date {
			return time.Unix(int64(i)*86400, 0).UTC()
		}
		return int64(i)
	case avro.Long:
		i := r.ReadLong()
		switch logicalTypeOf(s) {
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return time.UnixMilli(i).UTC()
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return time.UnixMicro(i).UTC()
		}
		return i
	case avro.Float:
		return float32to64(r.ReadFloat())
	case avro.Double:
		return r.ReadDouble()
	case avro.String:
		return r.ReadString()
	case avro.Bytes:
		b := r.ReadBytes()
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			if len(b) > decimalBytes(d.Precision())+1 {
				// Also keeps a corrupt length from a costly conversion.
				r.ReportError("decode", fmt.Sprintf("a decimal(%d,%d) of %d bytes", d.Precision(), d.Scale(), len(b)))
				return nil
			}
			return decimalNumber(b, d.Scale())
		}
		return b
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		b := make([]byte, fs.Size())
		r.Read(b)
		if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			return decimalNumber(b, d.Scale())
		}
		return b
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		i := int(r.ReadInt())
		sym, ok := es.Symbol(i)
		if !ok {
			r.ReportError("decode", fmt.Sprintf("enum %s has no symbol %d", es.FullName(), i))
			return nil
		}
		return sym
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		arr := []any{}
		for total := int64(0); ; {
			n, _ := r.ReadBlockHeader()
			if n == 0 || r.Error != nil {
				break
			}
			if total += n; n < 0 || total > maxAvroItems {
				r.ReportError("decode", fmt.Sprintf("array of more than %d items", maxAvroItems))
				return nil
			}
			for range n {
				arr = append(arr, decodeAvro(r, items))
				if r.Error != nil {
					return nil
				}
			}
		}
		return arr
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		m := map[string]any{}
		for total := int64(0); ; {
			n, _ := r.ReadBlockHeader()
			if n == 0 || r.Error != nil {
				break
			}
			if total += n; n < 0 || total > maxAvroItems {
				r.ReportError("decode", fmt.Sprintf("map of more than %d entries", maxAvroItems))
				return nil
			}
			for range n {
				k := r.ReadString()
				m[k] = decodeAvro(r, values)
				if r.Error != nil {
					return nil
				}
			}
		}
		return m
	case avro.Record, avro.Error:
		fields := s.(*avro.RecordSchema).Fields()
		m := make(map[string]any, len(fields))
		for _, f := range fields {
			m[f.Name()] = decodeAvro(r, f.Type())
		}
		return m
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		i := r.ReadLong()
		if i < 0 || i >= int64(len(types)) {
			r.ReportError("decode", fmt.Sprintf("union index %d out of range", i))
			return nil
		}
		return decodeAvro(r, types[i])
	}
	r.ReportError("decode", "unsupported schema type "+string(s.Type()))
	return nil
}

// decimalNumber turns the big-endian two's complement unscaled value b
// into an exact decimal json.Number.
func decimalNumber(b []byte, scale int) json.Number {
	n := new(big.Int).SetBytes(b)
	if len(b) > 0 && b[0]&0x80 != 0 {
		n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
	}
	return json.Number(formatUnscaled(n, scale))
}

// formatUnscaled writes unscaled·10^-scale in decimal.
func formatUnscaled(n *big.Int, scale int) string {
	s := n.String()
	if scale <= 0 {
		return s
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
	return s
}

// avroEncoder appends values of the contract to dst in Avro's binary
// encoding, coercing them to the schema. Errors name the field path.
type avroEncoder struct{}

func fieldPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func (e *avroEncoder) fail(path string, format string, args ...any) error {
	if path == "" {
		path = "(record)"
	}
	return fmt.Errorf("%w: field %s: %s", errAvroValue, path, fmt.Sprintf(format, args...))
}

func appendLong(dst []byte, v int64) []byte { return binary.AppendVarint(dst, v) }

func appendBytes(dst []byte, b []byte) []byte {
	dst = appendLong(dst, int64(len(b)))
	return append(dst, b...)
}

// encode appends v encoded with schema s.
func (e *avroEncoder) encode(dst []byte, v any, s avro.Schema, path string) ([]byte, error) {
	s = deref(s)
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return dst, e.fail(path, "%s for null", describe(v))
		}
		return dst, nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return dst, e.fail(path, "%s for boolean", describe(v))
		}
		if b {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case avro.Int:
		var i int64
		var err error
		switch logicalTypeOf(s) {
		case avro.Date:
			i, err = e.days(v, path)
		default:
			i, err = e.integer(v, path, "int")
		}
		if err != nil {
			return dst, err
		}
		if i < math.MinInt32 || i > math.MaxInt32 {
			return dst, e.fail(path, "%d does not fit an Avro int", i)
		}
		return appendLong(dst, i), nil
	case avro.Long:
		var i int64
		var err error
		switch lt := logicalTypeOf(s); lt {
		case avro.TimestampMillis, avro.LocalTimestampMillis, avro.TimestampMicros, avro.LocalTimestampMicros:
			i, err = e.timestamp(v, path, lt == avro.TimestampMicros || lt == avro.LocalTimestampMicros)
		default:
			i, err = e.integer(v, path, "long")
		}
		if err != nil {
			return dst, err
		}
		return appendLong(dst, i), nil
	case avro.Float:
		f, err := e.float(v, path, "float")
		if err != nil {
			return dst, err
		}
		return binary.LittleEndian.AppendUint32(dst, math.Float32bits(float32(f))), nil
	case avro.Double:
		f, err := e.float(v, path, "double")
		if err != nil {
			return dst, err
		}
		return binary.LittleEndian.AppendUint64(dst, math.Float64bits(f)), nil
	case avro.String:
		switch x := v.(type) {
		case string:
			dst = appendLong(dst, int64(len(x)))
			return append(dst, x...), nil
		case []byte:
			return appendBytes(dst, x), nil
		case json.Number:
			dst = appendLong(dst, int64(len(x)))
			return append(dst, x...), nil
		case time.Time:
			return appendBytes(dst, x.AppendFormat(nil, time.RFC3339Nano)), nil
		}
		return dst, e.fail(path, "%s for string", describe(v))
	case avro.Bytes:
		if d, ok := logicalOf(s).(*avro.DecimalLogicalSchema); ok {
			n, err := e.unscaled(v, path, d)
			if err != nil {
				return dst, err
			}
			return appendBytes(dst, twosComplement(n, 0)), nil
		}
		switch x := v.(type) {
		case []byte:
			return appendBytes(dst, x), nil
		case string:
			dst = appendLong(dst, int64(len(x)))
			return append(dst, x...), nil
		}
		return dst, e.fail(path, "%s for bytes", describe(v))
	case avro.Fixed:
		fs := s.(*avro.FixedSchema)
		if d, ok := fs.Logical().(*avro.DecimalLogicalSchema); ok {
			n, err := e.unscaled(v, path, d)
			if err != nil {
				return dst, err
			}
			b := twosComplement(n, fs.Size())
			if len(b) != fs.Size() {
				return dst, e.fail(path, "decimal %s does not fit fixed(%d)", v, fs.Size())
			}
			return append(dst, b...), nil
		}
		var b []byte
		switch x := v.(type) {
		case []byte:
			b = x
		case string:
			b = []byte(x)
		default:
			rv := reflect.ValueOf(v)
			if rv.Kind() != reflect.Array || rv.Type().Elem().Kind() != reflect.Uint8 {
				return dst, e.fail(path, "%s for fixed(%d)", describe(v), fs.Size())
			}
			b = make([]byte, rv.Len())
			reflect.Copy(reflect.ValueOf(b), rv)
		}
		if len(b) != fs.Size() {
			return dst, e.fail(path, "%d bytes for fixed(%d)", len(b), fs.Size())
		}
		return append(dst, b...), nil
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		sym, ok := v.(string)
		if !ok {
			return dst, e.fail(path, "%s for enum %s", describe(v), es.FullName())
		}
		i := slices.Index(es.Symbols(), sym)
		if i < 0 {
			return dst, e.fail(path, "%q is not a symbol of enum %s %v", sym, es.FullName(), es.Symbols())
		}
		return appendLong(dst, int64(i)), nil
	case avro.Array:
		items := s.(*avro.ArraySchema).Items()
		var list []any
		switch x := v.(type) {
		case []any:
			list = x
		default:
			rv := reflect.ValueOf(v)
			if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
				return dst, e.fail(path, "%s for array", describe(v))
			}
			list = make([]any, rv.Len())
			for i := range list {
				list[i] = rv.Index(i).Interface()
			}
		}
		if len(list) > 0 {
			dst = appendLong(dst, int64(len(list)))
			for i, it := range list {
				var err error
				if dst, err = e.encode(dst, it, items, fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	case avro.Map:
		values := s.(*avro.MapSchema).Values()
		m, ok := v.(map[string]any)
		if !ok {
			return dst, e.fail(path, "%s for map", describe(v))
		}
		if len(m) > 0 {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			dst = appendLong(dst, int64(len(keys)))
			for _, k := range keys {
				dst = appendLong(dst, int64(len(k)))
				dst = append(dst, k...)
				var err error
				if dst, err = e.encode(dst, m[k], values, fmt.Sprintf("%s[%q]", path, k)); err != nil {
					return dst, err
				}
			}
		}
		return append(dst, 0), nil
	case avro.Record, avro.Error:
		rs := s.(*avro.RecordSchema)
		m, ok := v.(map[string]any)
		if !ok {
			return dst, e.fail(path, "%s for record %s", describe(v), rs.FullName())
		}
		for _, f := range rs.Fields() {
			fp := fieldPath(path, f.Name())
			fv, ok := m[f.Name()]
			if !ok && !f.HasDefault() {
				if u, isUnion := deref(f.Type()).(*avro.UnionSchema); isUnion && u.Nullable() {
					// A missing optional field is null, as in Parquet.
					var err error
					if dst, err = e.encode(dst, nil, u, fp); err != nil {
						return dst, err
					}
					continue
				}
				return dst, e.fail(fp, "missing, and the schema gives no default")
			}
			if !ok {
				fv = f.Default()
				ft := deref(f.Type())
				if u, isUnion := ft.(*avro.UnionSchema); isUnion {
					// A union's default is of its first branch.
					dst = append(dst, 0)
					ft = u.Types()[0]
				}
				var err error
				if dst, err = e.encode(dst, fv, ft, fp); err != nil {
					return dst, err
				}
				continue
			}
			var err error
			if dst, err = e.encode(dst, fv, f.Type(), fp); err != nil {
				return dst, err
			}
		}
		return dst, nil
	case avro.Union:
		types := s.(*avro.UnionSchema).Types()
		if v == nil {
			for i, t := range types {
				if t.Type() == avro.Null {
					return appendLong(dst, int64(i)), nil
				}
			}
			return dst, e.fail(path, "null for a union without null")
		}
		// A branch of the value's own kind first, then the first branch
		// the value can be coerced to.
		for _, strict := range []bool{true, false} {
			for i, t := range types {
				if t.Type() == avro.Null || (strict && !sameKind(v, deref(t))) {
					continue
				}
				out, err := e.encode(appendLong(dst, int64(i)), v, t, path)
				if err == nil {
					return out, nil
				}
			}
		}
		if len(types) == 2 && (types[0].Type() == avro.Null || types[1].Type() == avro.Null) {
			// ["null", T]: T's own error says what is wrong.
			t := types[0]
			if t.Type() == avro.Null {
				t = types[1]
			}
			_, err := e.encode(dst, v, t, path)
			return dst, err
		}
		names := make([]string, len(types))
		for i, t := range types {
			names[i] = string(deref(t).Type())
		}
		return dst, e.fail(path, "%s matches no branch of the union %v", describe(v), names)
	}
	return dst, e.fail(path, "unsupported schema type %s", s.Type())
}

// sameKind reports whether v is the natural value of schema s.
func sameKind(v any, s avro.Schema) bool {
	lt := logicalTypeOf(s)
	switch v.(type) {
	case bool:
		return s.Type() == avro.Boolean
	case int64, int, int32:
		return (s.Type() == avro.Long || s.Type() == avro.Int) && lt == ""
	case float64, float32:
		return s.Type() == avro.Double || s.Type() == avro.Float
	case json.Number:
		return lt == avro.Decimal || s.Type() == avro.Double
	case string:
		return s.Type() == avro.String || s.Type() == avro.Enum
	case []byte:
		return (s.Type() == avro.Bytes || s.Type() == avro.Fixed) && lt == ""
	case time.Time:
		return lt == avro.TimestampMillis || lt == avro.TimestampMicros || lt == avro.Date ||
			lt == avro.LocalTimestampMillis || lt == avro.LocalTimestampMicros
	case map[string]any:
		return s.Type() == avro.Record || s.Type() == avro.Map
	case []any:
		return s.Type() == avro.Array
	}
	return false
}

func describe(v any) string {
	if v == nil {
		return "null"
	}
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			x = x[:40] + "…"
		}
		return fmt.Sprintf("string %q", x)
	case json.Number:
		return "number " + string(x)
	case int64, int, int32, float64, float32:
		return fmt.Sprintf("%T %v", v, v)
	}
	return fmt.Sprintf("a %T", v)
}

// integer coerces a number to an int64: integers, floats and json.Number
// without a fraction.
func (e *avroEncoder) integer(v any, path, typ string) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case float64:
		if x == math.Trunc(x) && x >= -(1<<63) && x < 1<<63 {
			return int64(x), nil
		}
		return 0, e.fail(path, "%v is not an integer (%s)", x, typ)
	case float32:
		return e.integer(float64(x), path, typ)
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		if r, ok := new(big.Rat).SetString(string(x)); ok && r.IsInt() && r.Num().IsInt64() {
			return r.Num().Int64(), nil
		}
		return 0, e.fail(path, "%s is not a 64-bit integer (%s)", x, typ)
	}
	return 0, e.fail(path, "%s for %s", describe(v), typ)
}

func (e *avroEncoder) float(v any, path, typ string) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case float32:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case int:
		return float64(x), nil
	case int32:
		return float64(x), nil
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return 0, e.fail(path, "%s is not a %s", x, typ)
		}
		return f, nil
	}
	return 0, e.fail(path, "%s for %s", describe(v), typ)
}

// timestamp coerces time.Time, an RFC 3339 string or a number of
// milliseconds (micros: microseconds) since the epoch.
func (e *avroEncoder) timestamp(v any, path string, micros bool) (int64, error) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case string:
		var err error
		if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
			return 0, e.fail(path, "%q is not an RFC 3339 timestamp", x)
		}
	default:
		return e.integer(v, path, "timestamp")
	}
	if micros {
		return t.UnixMicro(), nil
	}
	return t.UnixMilli(), nil
}

// days coerces time.Time, a "2006-01-02" or RFC 3339 string, or a number
// of days since the epoch to a date.
func (e *avroEncoder) days(v any, path string) (int64, error) {
	var t time.Time
	switch x := v.(type) {
	case time.Time:
		t = x
	case string:
		var err error
		if t, err = time.Parse(time.DateOnly, x); err != nil {
			if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
				return 0, e.fail(path, "%q is not a date (2006-01-02)", x)
			}
		}
	default:
		return e.integer(v, path, "date")
	}
	y, m, d := t.Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400, nil
}

// unscaled returns v·10^scale as an integer; it fails if that is not
// exact or has more digits than the precision.
func (e *avroEncoder) unscaled(v any, path string, d *avro.DecimalLogicalSchema) (*big.Int, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case string:
		s = x
	case int64, int, int32:
		s = fmt.Sprint(x)
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		return nil, e.fail(path, "%s for decimal(%d,%d)", describe(v), d.Precision(), d.Scale())
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, e.fail(path, "%q is not a decimal number", s)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d.Scale())), nil)))
	if !r.IsInt() {
		return nil, e.fail(path, "%s has more than %d decimal places", s, d.Scale())
	}
	n := r.Num()
	if len(new(big.Int).Abs(n).String()) > d.Precision() {
		return nil, e.fail(path, "%s has more than %d digits (decimal(%d,%d))", s, d.Precision(), d.Precision(), d.Scale())
	}
	return n, nil
}

// twosComplement returns n as big-endian two's complement: the shortest
// encoding, or size bytes (sign-extended) if size > 0 and it fits.
func twosComplement(n *big.Int, size int) []byte {
	var b []byte
	if n.Sign() >= 0 {
		b = n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// 2^(8k) + n for the smallest k that keeps the sign bit.
		k := (n.BitLen() + 8) / 8
		m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), uint(8*k)), n)
		b = m.Bytes()
		for len(b) < k {
			b = append([]byte{0}, b...)
		}
		if b[0]&0x80 == 0 {
			b = append([]byte{0xff}, b...)
		}
	}
	if size > len(b) {
		pad := byte(0)
		if n.Sign() < 0 {
			pad = 0xff
		}
		b = append(slices.Repeat([]byte{pad}, size-len(b)), b...)
	}
	return b
}

// projectAvro conforms a value decoded with the writer's schema to the
// reader's schema (schema evolution): fields the reader does not know are
// dropped, fields the writer did not have take the reader's default,
// numbers are promoted, strings and bytes interchange.
func projectAvro(v any, s avro.Schema, path string) (any, error) {
	s = deref(s)
	switch s.Type() {
	case avro.Record, avro.Error:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field %s: %s for record", fieldPath(path, ""), describe(v))
		}
		out := make(map[string]any, len(s.(*avro.RecordSchema).Fields()))
		for _, f := range s.(*avro.RecordSchema).Fields() {
			fp := fieldPath(path, f.Name())
			fv, ok := m[f.Name()]
			if !ok {
				for _, a := range f.Aliases() {
					if fv, ok = m[a]; ok {
						break
					}
				}
			}
			if !ok {
				if !f.HasDefault() {
					return nil, fmt.Errorf("field %s: not in the file's schema, and the reader schema gives no default", fp)
				}
				d, err := avroDefault(f)
				if err != nil {
					return nil, fmt.Errorf("field %s: default: %w", fp, err)
				}
				out[f.Name()] = d
				continue
			}
			pv, err := projectAvro(fv, f.Type(), fp)
			if err != nil {
				return nil, err
			}
			out[f.Name()] = pv
		}
		return out, nil
	case avro.Union:
		if v == nil {
			return nil, nil
		}
		var first error
		for _, t := range s.(*avro.UnionSchema).Types() {
			if t.Type() == avro.Null {
				continue
			}
			pv, err := projectAvro(v, t, path)
			if err == nil {
				return pv, nil
			}
			if first == nil {
				first = err
			}
		}
		if first == nil {
			first = fmt.Errorf("field %s: %s for null", path, describe(v))
		}
		return nil, first
	case avro.Array:
		l, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("field %s: %s for array", path, describe(v))
		}
		for i := range l {
			pv, err := projectAvro(l[i], s.(*avro.ArraySchema).Items(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			l[i] = pv
		}
		return l, nil
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field %s: %s for map", path, describe(v))
		}
		for k, x := range m {
			pv, err := projectAvro(x, s.(*avro.MapSchema).Values(), fmt.Sprintf("%s[%q]", path, k))
			if err != nil {
				return nil, err
			}
			m[k] = pv
		}
		return m, nil
	case avro.Float, avro.Double:
		if i, ok := v.(int64); ok {
			return float64(i), nil
		}
	case avro.String:
		if b, ok := v.([]byte); ok {
			return string(b), nil
		}
	case avro.Bytes:
		if x, ok := v.(string); ok {
			return []byte(x), nil
		}
	case avro.Enum:
		es := s.(*avro.EnumSchema)
		if x, ok := v.(string); ok && !slices.Contains(es.Symbols(), x) {
			if es.HasDefault() {
				return es.Default(), nil
			}
			return nil, fmt.Errorf("field %s: %q is not a symbol of the reader's enum %s", path, x, es.FullName())
		}
	case avro.Null:
		if v != nil {
			return nil, fmt.Errorf("field %s: %s for null", path, describe(v))
		}
	}
	return v, nil
}

// avroDefault returns a field's default in the value contract: encoded
// with the field's schema and decoded again.
func avroDefault(f *avro.Field) (any, error) {
	t := deref(f.Type())
	if u, ok := t.(*avro.UnionSchema); ok {
		t = u.Types()[0]
	}
	var e avroEncoder
	b, err := e.encode(nil, f.Default(), t, f.Name())
	if err != nil {
		return nil, err
	}
	r := avro.NewReader(nil, 0).Reset(b)
	v := decodeAvro(r, t)
	return v, r.Error
}

// float32to64 widens f to the float64 nearest its shortest decimal form,
// so that a float 0.1 reads as 0.1, not 0.10000000149011612 (narrowed
// back, it is f again).
func float32to64(f float32) float64 {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return float64(f)
	}
	d, err := strconv.ParseFloat(strconv.FormatFloat(float64(f), 'g', -1, 32), 64)
	if err != nil {
		return float64(f)
	}
	return d
}
