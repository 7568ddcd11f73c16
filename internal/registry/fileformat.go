package registry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"unsafe"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/internal/format"
)

// lineFormats are the formats the file connectors read and write, one
// record per line; bulkFormats (filebulk.go) are whole files.
var lineFormats = []string{"json", "csv", "string", "raw"}

// fileFormatOptions are the file connectors' format options: format (one
// of lineFormats or bulkFormats), the CSV format's, the Avro schema and,
// for the sink, the Avro and Parquet writers'.
func fileFormatOptions(sink bool) []Option {
	schemaDoc := "avro: a reader schema (JSON): each file's records are resolved to it (Avro's schema evolution rules); default: none, each file's own schema"
	if sink {
		schemaDoc = "avro, parquet: the Avro record schema (JSON) of the files written; required for them (or schema-file); default: none"
	}
	opts := append([]Option{{Name: "format", Type: String, Default: "json", Check: checkLineFormat,
		Description: "format of the files: json (one object per line), csv (one row per line), string (the line as text), raw (the line's bytes), " +
			"avro (Avro object container files), parquet (Parquet files); avro and parquet are whole files: not splittable, read from their start or a checkpointed block or row"}},
		csvOptions...)
	opts = append(opts,
		Option{Name: "schema", Type: String, Description: schemaDoc},
		Option{Name: "schema-file", Type: String, Description: "a file holding schema, instead of it (default: none)"})
	if sink {
		opts = append(opts,
			Option{Name: "avro.codec", Type: Enum, Values: []string{"null", "deflate", "snappy", "zstandard"},
				Description: "avro: block compression (Flink's avro.codec); default snappy"},
			Option{Name: "parquet.compression", Type: Enum, Values: []string{"uncompressed", "snappy", "gzip", "zstd", "lz4"},
				Description: "parquet: page compression; default snappy"},
			Option{Name: "parquet.row-group-size", Type: Int, Check: Positive,
				Description: "parquet: bytes of values (uncompressed) per row group, held in memory until it ends (parquet-java's parquet.block.size); default 134217728 (128 MiB)"})
	}
	return opts
}

func checkLineFormat(v any) error {
	s, _ := v.(string)
	if isBulkFormat(s) {
		return nil
	}
	if !slices.Contains(lineFormats, s) {
		return fmt.Errorf("want one of %s, %s", strings.Join(lineFormats, ", "), strings.Join(bulkFormats, ", "))
	}
	if !slices.Contains(formatNames, s) {
		return fmt.Errorf("format %s is not available in this build (want one of %s)", s, strings.Join(formatNames, ", "))
	}
	return nil
}

// fileSourceFormat is the file source's format: each line's bytes (blank
// lines skipped), decoded with the format's codec when decode is set and
// checked otherwise, so that a malformed line follows on-malformed either
// way. JSON lines whose values a transform replaces are decoded straight
// from the read buffer, without keeping their bytes.
func fileSourceFormat(o Options, decode, replaced bool) (file.Format[Record], error) {
	name, _ := valueFormat(o)
	if isBulkFormat(name) {
		return objectFileFormat(o)
	}
	if name == "json" && decode && replaced {
		// Decoded straight from the read buffer (no copy of the line):
		// the records have no bytes, so a sink encodes them.
		return jsonObjects{file.JSONLines[map[string]any]()}, nil
	}
	codecs, err := sourceCodecs(o)
	if err != nil {
		return nil, err
	}
	what := name
	if name == "json" {
		what = "JSON" // the error names a "JSON line", as before formats
	}
	return textRecords{lines: file.TextLines(), c: codecs, what: what, decode: decode, skipBlank: name == "json"}, nil
}

// jsonObjects reads JSON lines into decoded records.
type jsonObjects struct{ f file.Format[map[string]any] }

func (j jsonObjects) Splittable() bool { return j.f.Splittable() }

func (j jsonObjects) NewReader(r io.Reader, offset int64) (file.RecordReader[Record], error) {
	rr, err := j.f.NewReader(r, offset)
	if err != nil {
		return nil, err
	}
	return objectReader{rr}, nil
}

type objectReader struct {
	rr file.RecordReader[map[string]any]
}

func (o objectReader) Read() (Record, int64, error) {
	v, next, err := o.rr.Read()
	if err != nil {
		return Record{}, next, err
	}
	return NewRecord(v), next, nil
}

// textRecords reads lines into records.
type textRecords struct {
	lines     file.Format[string]
	c         *Codecs
	what      string
	decode    bool
	skipBlank bool
}

func (t textRecords) Splittable() bool { return true }

func (t textRecords) NewReader(r io.Reader, offset int64) (file.RecordReader[Record], error) {
	rr, err := t.lines.NewReader(r, offset)
	if err != nil {
		return nil, err
	}
	return textReader{rr, t}, nil
}

type textReader struct {
	rr file.RecordReader[string]
	t  textRecords
}

func (t textReader) Read() (Record, int64, error) {
	for {
		line, next, err := t.rr.Read()
		if err != nil {
			return Record{}, next, err
		}
		if t.t.skipBlank && strings.TrimSpace(line) == "" {
			continue
		}
		// The line's own string, as bytes without a copy: records never
		// write into their bytes (codecs read them, sinks copy them).
		b := unsafe.Slice(unsafe.StringData(line), len(line))
		r := RawRecord(b, t.t.c)
		if t.t.decode {
			r, err = r.Decode(context.Background())
		} else {
			err = checkValue(context.Background(), t.t.c.Value, "", b)
			r.checked = err == nil
		}
		if err != nil {
			return Record{}, next, file.MalformedError(b, fmt.Errorf("%s line: %w", t.t.what, err))
		}
		return r, next, nil
	}
}

// lineFormat writes one record per line with a codec: the bytes as read
// when the codec's Identity is the record's (encodeValue). A JSON value
// whose bytes as read span lines is encoded again (on one line); another
// format's value that holds a line break is an error.
type lineFormat struct{ c format.Codec }

func (l lineFormat) AppendRecord(dst []byte, r Record) ([]byte, error) {
	start := len(dst)
	out, err := encodeValue(context.Background(), l.c, "", dst, r)
	if err != nil {
		return dst[:start], fmt.Errorf("file sink: %w", err)
	}
	if bytes.ContainsAny(out[start:], "\r\n") {
		if _, _, raw := r.Bytes(); !raw || (l.c.Identity() != "json" && l.c.Identity() != "json-object") {
			return dst[:start], fmt.Errorf("file sink: a %s value with a line break cannot be written one per line", l.c.Identity())
		}
		dr, err := r.Decode(context.Background())
		if err != nil {
			return dst[:start], fmt.Errorf("file sink: %w", err)
		}
		if out, err = l.c.Encode(context.Background(), "", out[:start], dr.Value()); err != nil {
			return dst[:start], fmt.Errorf("file sink: %w", err)
		}
	}
	return append(out, '\n'), nil
}
