package format

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

func init() {
	prev := registerMore
	registerMore = func(f *Formats) {
		prev(f)
		f.Register("csv", newCSV)
	}
}

// csvCodec reads and writes one CSV row (RFC 4180) per record.
type csvCodec struct {
	comma   rune
	columns []string
}

func newCSV(c Config) (Codec, error) {
	comma := c.CSVComma
	if comma == 0 {
		comma = ','
	}
	if comma == '"' || comma == '\r' || comma == '\n' || comma == utf8.RuneError || !utf8.ValidRune(comma) {
		return nil, fmt.Errorf("csv format: invalid separator %q", comma)
	}
	seen := map[string]bool{}
	for _, col := range c.CSVColumns {
		if seen[col] {
			return nil, fmt.Errorf("csv format: column %q named twice", col)
		}
		seen[col] = true
	}
	return &csvCodec{comma: comma, columns: append([]string(nil), c.CSVColumns...)}, nil
}

// Decode reads one row: an object with the configured columns (every
// value a string), or without columns a list of strings. A trailing line
// break is allowed; a second row is an error.
func (c *csvCodec) Decode(_ context.Context, _ string, b []byte) (any, error) {
	fields, err := c.row(b)
	if err != nil {
		return nil, err
	}
	if c.columns == nil {
		out := make([]any, len(fields))
		for i, f := range fields {
			out[i] = f
		}
		return out, nil
	}
	if len(fields) != len(c.columns) {
		return nil, fmt.Errorf("csv format: the row has %d fields, want %d (columns %q)", len(fields), len(c.columns), c.columns)
	}
	m := make(map[string]any, len(fields))
	for i, f := range fields {
		m[c.columns[i]] = f
	}
	return m, nil
}

// Validate checks a row as Decode does (one row; with columns, their
// number of fields), for bytes passed through undecoded.
func (c *csvCodec) Validate(b []byte) error {
	fields, err := c.row(b)
	if err != nil {
		return err
	}
	if c.columns != nil && len(fields) != len(c.columns) {
		return fmt.Errorf("csv format: the row has %d fields, want %d (columns %q)", len(fields), len(c.columns), c.columns)
	}
	return nil
}

func (c *csvCodec) row(b []byte) ([]string, error) {
	if len(bytes.TrimRight(b, "\r\n")) == 0 {
		// encoding/csv skips empty lines; a record is one row, so an
		// empty one is one empty field.
		return []string{""}, nil
	}
	r := csv.NewReader(bytes.NewReader(b))
	r.Comma = c.comma
	r.FieldsPerRecord = -1
	fields, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("csv format: %w", err)
	}
	if _, err := r.Read(); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("csv format: after the first row: %w", err)
		}
		return nil, errors.New("csv format: the record holds more than one row")
	}
	return fields, nil
}

// Encode writes one row without a trailing line break: with columns, an
// object's fields in column order (a missing or null field is empty);
// without, a list's items.
func (c *csvCodec) Encode(_ context.Context, _ string, dst []byte, v any) ([]byte, error) {
	var fields []string
	if c.columns != nil {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("csv format: cannot write %s as a row (want an object with columns %q)", aKind(v), c.columns)
		}
		fields = make([]string, len(c.columns))
		for i, col := range c.columns {
			s, err := csvField(m[col])
			if err != nil {
				return nil, fmt.Errorf("csv format: column %q: %w", col, err)
			}
			fields[i] = s
		}
	} else {
		l, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("csv format: cannot write %s as a row (want a list; or configure columns to write objects)", aKind(v))
		}
		fields = make([]string, len(l))
		for i, x := range l {
			s, err := csvField(x)
			if err != nil {
				return nil, fmt.Errorf("csv format: item %d: %w", i, err)
			}
			fields[i] = s
		}
	}
	if len(fields) == 1 && fields[0] == "" {
		// encoding/csv writes an empty line, which readers skip.
		return append(dst, `""`...), nil
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	w.Comma = c.comma
	if err := w.Write(fields); err != nil {
		return nil, fmt.Errorf("csv format: %w", err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("csv format: %w", err)
	}
	out := buf.Bytes()
	out = out[:len(out)-1] // the writer's '\n'
	return append(dst, out...), nil
}

// csvField renders a scalar as JSON would, strings without quotes.
func csvField(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case json.Number:
		return string(x), nil
	case time.Time:
		return x.Format(time.RFC3339Nano), nil
	case map[string]any, []any:
		return "", fmt.Errorf("%s cannot be a CSV field", aKind(v))
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return "", fmt.Errorf("%s cannot be a CSV field", aKind(v))
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return string(b), nil
}

func (c *csvCodec) Identity() string { return fmt.Sprintf("csv:%q:%q", c.comma, c.columns) }

// aKind is kindOf with an article: "an object", "a list".
func aKind(v any) string {
	k := KindOf(v)
	if k != "" && strings.ContainsRune("aeiou", rune(k[0])) {
		return "an " + k
	}
	return "a " + k
}
