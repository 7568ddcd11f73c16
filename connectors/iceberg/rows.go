package iceberg

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// Row is one record as the table's columns: column name to value. Values
// are JSON-like: nil, bool, int64 (or int, int32), float64 (or float32),
// json.Number, string, []byte, time.Time. How each maps to a column type:
//
//   - boolean: a bool.
//   - int, long: an integer, or a float64/json.Number without fraction in
//     range.
//   - float, double: a number.
//   - string: a string.
//   - binary: []byte or a string (its bytes).
//   - date: time.Time, a string "2006-01-02" or RFC 3339, or an integer
//     (days since 1970-01-01).
//   - timestamp, timestamptz: time.Time, an RFC 3339 string, or an integer
//     (milliseconds since the epoch).
//
// A missing column or nil is null; null in a required column, a value of
// another kind, or a key that is not a column of the table (with a value:
// a null field is the same as a missing one) fails the job with an error
// naming the column, unless [AddColumns] adds it.
type Row = map[string]any

// rowBuilder appends rows to an Arrow record batch of the table's schema.
type rowBuilder struct {
	schema  *arrow.Schema
	b       *array.RecordBuilder
	cols    []column
	byName  map[string]int
	rows    int
	bytes   int64 // estimate of the buffered data
	evField int   // column filled from the event time when absent; -1 = none
}

type column struct {
	name     string
	required bool
	conv     func(v any) (any, int, error) // normalizes v for appendValue, with its estimated size
}

func newRowBuilder(sc *iceberg.Schema, eventTimeColumn string) (*rowBuilder, error) {
	as, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		return nil, fmt.Errorf("table schema to Arrow: %w", err)
	}
	rb := &rowBuilder{schema: as, byName: map[string]int{}, evField: -1}
	for i, f := range sc.Fields() {
		conv, err := converterFor(f.Type)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrUnsupportedSchema, f.Name, err)
		}
		rb.cols = append(rb.cols, column{name: f.Name, required: f.Required, conv: conv})
		rb.byName[f.Name] = i
	}
	if eventTimeColumn != "" {
		i, ok := rb.byName[eventTimeColumn]
		if !ok {
			return nil, fmt.Errorf("%w: EventTimeColumn %q is not a column of the table", ErrInvalidConfig, eventTimeColumn)
		}
		switch sc.Field(i).Type.(type) {
		case iceberg.TimestampType, iceberg.TimestampTzType, iceberg.Int64Type, iceberg.DateType:
		default:
			return nil, fmt.Errorf("%w: EventTimeColumn %q is a %s column; want timestamp, timestamptz, date or long", ErrInvalidConfig, eventTimeColumn, sc.Field(i).Type)
		}
		rb.evField = i
	}
	rb.b = array.NewRecordBuilder(memory.DefaultAllocator, as)
	return rb, nil
}

// add appends one row. On error nothing of the row is kept.
func (rb *rowBuilder) add(r Row, eventTime int64, hasEventTime bool) error {
	for k, v := range r {
		if _, ok := rb.byName[k]; !ok && v != nil { // null is the same as missing
			return fmt.Errorf("%w: field %q is not a column of the table (AddColumns adds such fields as columns)", ErrBadRecord, k)
		}
	}
	// convert every value first, so that a bad row leaves nothing behind
	var size int
	vals := make([]any, len(rb.cols))
	for i, c := range rb.cols {
		v := r[c.name]
		if v == nil && i == rb.evField && hasEventTime {
			v = time.UnixMilli(eventTime).UTC()
		}
		if v == nil {
			if c.required {
				return fmt.Errorf("%w: column %q is required, the record has no value for it", ErrBadRecord, c.name)
			}
			size++
			continue
		}
		nv, n, err := c.conv(v)
		if err != nil {
			return fmt.Errorf("%w: column %q: %w", ErrBadRecord, c.name, err)
		}
		vals[i], size = nv, size+n
	}
	for i, v := range vals {
		appendValue(rb.b.Field(i), v)
	}
	rb.rows++
	rb.bytes += int64(size)
	return nil
}

// appendValue appends a value converterFor normalized (nil = null).
func appendValue(b array.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.AppendNull()
	case bool:
		b.(*array.BooleanBuilder).Append(x)
	case int32:
		b.(*array.Int32Builder).Append(x)
	case int64:
		b.(*array.Int64Builder).Append(x)
	case float32:
		b.(*array.Float32Builder).Append(x)
	case float64:
		b.(*array.Float64Builder).Append(x)
	case string:
		switch sb := b.(type) {
		case *array.StringBuilder:
			sb.Append(x)
		case *array.LargeStringBuilder:
			sb.Append(x)
		}
	case []byte:
		b.(*array.BinaryBuilder).Append(x)
	case arrow.Date32:
		b.(*array.Date32Builder).Append(x)
	case arrow.Timestamp:
		b.(*array.TimestampBuilder).Append(x)
	}
}

// batch returns the rows added so far as a record batch and starts anew.
func (rb *rowBuilder) batch() arrow.RecordBatch {
	rec := rb.b.NewRecordBatch()
	rb.rows, rb.bytes = 0, 0
	return rec
}

func (rb *rowBuilder) release() { rb.b.Release() }

func converterFor(t iceberg.Type) (func(any) (any, int, error), error) {
	switch t.(type) {
	case iceberg.BooleanType:
		return func(v any) (any, int, error) {
			x, err := parseBool(v)
			return x, 1, err
		}, nil
	case iceberg.Int32Type:
		return func(v any) (any, int, error) {
			n, err := parseInt32(v)
			return n, 4, err
		}, nil
	case iceberg.Int64Type:
		return func(v any) (any, int, error) {
			n, err := parseInt64(v)
			return n, 8, err
		}, nil
	case iceberg.Float32Type:
		return func(v any) (any, int, error) {
			f, err := toFloat(v)
			return float32(f), 4, err
		}, nil
	case iceberg.Float64Type:
		return func(v any) (any, int, error) {
			f, err := toFloat(v)
			return f, 8, err
		}, nil
	case iceberg.StringType:
		return func(v any) (any, int, error) {
			s, err := parseString(v)
			return s, len(s) + 4, err
		}, nil
	case iceberg.BinaryType:
		return func(v any) (any, int, error) {
			p, err := parseBinary(v)
			return p, len(p) + 4, err
		}, nil
	case iceberg.DateType:
		return func(v any) (any, int, error) {
			d, err := parseDate(v)
			return arrow.Date32(d), 4, err
		}, nil
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return func(v any) (any, int, error) {
			us, err := parseTimestamp(v)
			return arrow.Timestamp(us), 8, err
		}, nil
	}
	return nil, fmt.Errorf("type %s is not supported by the sink (boolean, int, long, float, double, string, binary, date, timestamp, timestamptz)", t)
}

// The parse functions turn a value of the Row contract into the value of
// a column type (see [Row]); both data file writers use them.

func parseBool(v any) (bool, error) {
	x, ok := v.(bool)
	if !ok {
		return false, kindErr(v, "a boolean")
	}
	return x, nil
}

func parseInt32(v any) (int32, error) {
	n, err := toInt(v)
	if err != nil {
		return 0, err
	}
	if n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%d is out of the range of an int column", n)
	}
	return int32(n), nil
}

func parseInt64(v any) (int64, error) {
	if tm, ok := v.(time.Time); ok {
		return tm.UnixMilli(), nil
	}
	return toInt(v)
}

func parseString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", kindErr(v, "a string")
	}
	return s, nil
}

// parseBinary returns the bytes of v; a []byte is returned as it is (the
// caller copies it if it keeps it).
func parseBinary(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return x, nil
	case string:
		return []byte(x), nil
	}
	return nil, kindErr(v, "bytes or a string")
}

// parseDate returns days since 1970-01-01.
func parseDate(v any) (int32, error) {
	var days int64
	switch x := v.(type) {
	case time.Time:
		days = int64(math.Floor(float64(x.Unix()) / 86400))
	case string:
		tm, err := time.Parse(time.DateOnly, x)
		if err != nil {
			if tm, err = time.Parse(time.RFC3339Nano, x); err != nil {
				return 0, fmt.Errorf("%q is not a date (2006-01-02) or RFC 3339 time", x)
			}
		}
		days = int64(math.Floor(float64(tm.Unix()) / 86400))
	default:
		n, err := toInt(v)
		if err != nil {
			return 0, kindErr(v, "a date string, a time or days since 1970-01-01")
		}
		days = n
	}
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, fmt.Errorf("date %d days from 1970-01-01 is out of range", days)
	}
	return int32(days), nil
}

// parseTimestamp returns microseconds since the epoch.
func parseTimestamp(v any) (int64, error) {
	switch x := v.(type) {
	case time.Time:
		return x.UnixMicro(), nil
	case string:
		tm, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return 0, fmt.Errorf("%q is not an RFC 3339 time", x)
		}
		return tm.UnixMicro(), nil
	}
	ms, err := toInt(v)
	if err != nil {
		return 0, kindErr(v, "an RFC 3339 string, a time or epoch milliseconds")
	}
	return ms * 1000, nil
}

func kindErr(v any, want string) error {
	return fmt.Errorf("a %T value (%v), want %s", v, v, want)
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case float64:
		if x != math.Trunc(x) || x < math.MinInt64 || x >= math.MaxInt64 {
			return 0, fmt.Errorf("%v is not an integer", x)
		}
		return int64(x), nil
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s is not a 64-bit integer", x)
		}
		return n, nil
	}
	return 0, kindErr(v, "an integer")
}

func toFloat(v any) (float64, error) {
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
			return 0, fmt.Errorf("%s is not a number", x)
		}
		return f, nil
	}
	return 0, kindErr(v, "a number")
}
