package file

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HiveDefaultPartition is the directory value of a partition whose field
// is missing, null or the empty string (Hive's and Spark's name).
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// HivePart is one directory level of [HivePartitionsOf]: a name and how a
// record gives its value.
type HivePart struct {
	name  string
	value func(v map[string]any, c BucketContext) (any, error)
}

// HiveField is the partition name=<the record's field name>. A dotted
// name ("user.country") that is not a key of the record is looked up in
// nested maps.
func HiveField(name string) HivePart {
	return HivePart{name: name, value: func(v map[string]any, _ BucketContext) (any, error) {
		return lookupField(v, name), nil
	}}
}

// HiveTime is the partition name=<a time formatted with the Go layout>
// in UTC, for example HiveTime("dt", "2006-01-02", "ts") and
// HiveTime("hour", "15", "ts"). The time is the record's field (a
// time.Time, an RFC 3339 string, or a number of milliseconds since the
// epoch), or, if field is "", the record's event timestamp (a record
// without one fails the write). A missing or null field gives
// [HiveDefaultPartition].
func HiveTime(name, layout, field string) HivePart {
	return HivePart{name: name, value: func(v map[string]any, c BucketContext) (any, error) {
		var t time.Time
		if field == "" {
			if !c.HasTimestamp {
				return nil, fmt.Errorf("file: Hive partition %s: the record has no event timestamp", name)
			}
			t = time.UnixMilli(c.Timestamp)
		} else {
			switch x := lookupField(v, field).(type) {
			case nil:
				return nil, nil
			case time.Time:
				t = x
			case string:
				var err error
				if t, err = time.Parse(time.RFC3339Nano, x); err != nil {
					return nil, fmt.Errorf("file: Hive partition %s: field %s: %q is not an RFC 3339 time", name, field, x)
				}
			default:
				var e avroEncoder
				ms, err := e.integer(x, field, "time in milliseconds")
				if err != nil {
					return nil, fmt.Errorf("file: Hive partition %s: %w", name, err)
				}
				t = time.UnixMilli(ms)
			}
		}
		return t.UTC().Format(layout), nil
	}}
}

// HivePartitions returns a bucket assigner for map[string]any records
// that writes each record under one directory per field, Hive-style:
// HivePartitions("country", "city") puts {"country": "FR", "city":
// "Paris"} under country=FR/city=Paris. See [HivePartitionsOf].
func HivePartitions(fields ...string) BucketAssigner[map[string]any] {
	parts := make([]HivePart, len(fields))
	for i, f := range fields {
		parts[i] = HiveField(f)
	}
	return HivePartitionsOf(parts...)
}

// HivePartitionsOf returns a bucket assigner for map[string]any records
// that names buckets name=value/name=value/… (Hive's and Spark's layout),
// for example HivePartitionsOf(HiveTime("dt", "2006-01-02", "ts"),
// HiveTime("hour", "15", "ts")) gives dt=2026-12-01/hour=07.
//
// Values are written as text: strings as they are, numbers in decimal
// (json.Number as written), booleans as true/false, time.Time in RFC
// 3339, []byte as its bytes. A missing field, null or "" is
// [HiveDefaultPartition]; a map or array value fails the write. Names
// and values are escaped as Hive escapes them (FileUtils.escapePathName):
// control characters and "#%'*/:=?\{[]^ become %XX, so a value can never
// add a directory level or leave the base directory. Records keep the
// partition fields (unlike Hive tables, whose files leave them out).
func HivePartitionsOf(parts ...HivePart) BucketAssigner[map[string]any] {
	return BucketFunc[map[string]any](func(v map[string]any, c BucketContext) (string, error) {
		var b strings.Builder
		for i, p := range parts {
			x, err := p.value(v, c)
			if err != nil {
				return "", err
			}
			s, err := hiveValue(x)
			if err != nil {
				return "", fmt.Errorf("file: Hive partition %s: %w", p.name, err)
			}
			if i > 0 {
				b.WriteByte('/')
			}
			b.WriteString(hiveEscape(p.name))
			b.WriteByte('=')
			if s == "" {
				b.WriteString(HiveDefaultPartition)
			} else {
				b.WriteString(hiveEscape(s))
			}
		}
		return b.String(), nil
	})
}

func lookupField(v map[string]any, name string) any {
	if x, ok := v[name]; ok {
		return x
	}
	cur := v
	parts := strings.Split(name, ".")
	for i, p := range parts {
		x, ok := cur[p]
		if !ok {
			return nil
		}
		if i == len(parts)-1 {
			return x
		}
		if cur, ok = x.(map[string]any); !ok {
			return nil
		}
	}
	return nil
}

func hiveValue(x any) (string, error) {
	switch v := x.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case json.Number:
		return string(v), nil
	case int64:
		return strconv.FormatInt(v, 10), nil
	case int:
		return strconv.Itoa(v), nil
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		return strconv.FormatBool(v), nil
	case time.Time:
		return v.Format(time.RFC3339Nano), nil
	}
	return "", fmt.Errorf("a %T value cannot name a directory", x)
}

// hiveEscape escapes s as Hive's FileUtils.escapePathName does.
func hiveEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte("\"#%'*/:=?\\{[]^", c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
