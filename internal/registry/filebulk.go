package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/internal/format"
)

// The file connectors' whole-file formats: Avro object container files
// and Parquet (connectors/file AvroFile, AvroBulk, ParquetFile,
// ParquetBulk), and the file sink's Hive-style partitions (partition-by).

// bulkFormats are the file formats written one file per checkpoint.
var bulkFormats = []string{"avro", "parquet"}

func isBulkFormat(name string) bool { return name == "avro" || name == "parquet" }

// fileSuffix is the file sink's part file suffix: the suffix option, or
// the format's.
func fileSuffix(o Options) string {
	if o.Has("suffix") {
		return o.String("suffix")
	}
	switch o.String("format") {
	case "csv":
		return ".csv"
	case "string", "raw":
		return ".txt"
	case "avro":
		return ".avro"
	case "parquet":
		return ".parquet"
	}
	return ".jsonl"
}

// schemaText returns the Avro schema of the options (schema or the
// content of schema-file), the option it came from, and "" when neither
// is set.
func schemaText(o Options) (text, option string, err error) {
	if o.Has("schema") {
		return o.String("schema"), "schema", nil
	}
	if o.Has("schema-file") {
		name := o.String("schema-file")
		b, err := os.ReadFile(name)
		if err != nil {
			if o.FromEnvironment("schema-file") {
				return "", "schema-file", errors.New("cannot read the file (path from the environment not shown)")
			}
			return "", "schema-file", fmt.Errorf("cannot read the schema: %w", err)
		}
		return string(b), "schema-file", nil
	}
	return "", "", nil
}

// validateFileFormat checks the options of the formats for a file source
// (sink false) or sink.
func validateFileFormat(sink bool) func(Options) error {
	return func(o Options) error {
		name := o.String("format")
		if o.Has("schema") && o.Has("schema-file") {
			return optErr("schema-file", "set either schema or schema-file, not both")
		}
		text, opt, err := schemaText(o)
		if err != nil {
			return optErr(opt, "%v", err)
		}
		switch {
		case opt != "" && !isBulkFormat(name):
			return optErr(opt, "applies to format avro or parquet, not %s", name)
		case opt != "" && !sink && name == "parquet":
			return optErr(opt, "a reader schema applies to format avro only (Parquet files are read with their own schema)")
		case sink && isBulkFormat(name) && opt == "":
			return optErr("format", "%s needs schema or schema-file: an Avro record schema (JSON) of the records", name)
		}
		if !sink {
			if name == "avro" && opt != "" {
				if err := file.AvroFile(text).Err(); err != nil {
					return optErr(opt, "%v", err)
				}
			}
			return nil
		}
		for _, n := range []string{"avro.codec", "parquet.compression", "parquet.row-group-size"} {
			if o.Has(n) && !strings.HasPrefix(n, name+".") {
				return optErr(n, "applies to format %s only, not %s", strings.Split(n, ".")[0], name)
			}
		}
		if isBulkFormat(name) {
			f, codecErr := bulkFormat(o, text)
			if err := f.Err(); err != nil {
				if codecErr != "" {
					return optErr(codecErr, "%v", err)
				}
				return optErr(opt, "%v", err)
			}
		}
		if _, err := parsePartitionBy(o.Strings("partition-by")); err != nil {
			return optErr("partition-by", "%v", err)
		}
		return nil
	}
}

// errFormat is a bulk format as far as its configuration errors go.
type errFormat interface{ Err() error }

// bulkFormat makes the bulk format of the sink's options with schema
// text. option is the format option whose value is wrong when the
// format's error is not the schema's ("" otherwise).
func bulkFormat(o Options, text string) (f interface {
	errFormat
	file.BulkFormat[map[string]any]
}, option string) {
	switch o.String("format") {
	case "avro":
		var opts []file.AvroOption
		if o.Has("avro.codec") {
			opts = append(opts, file.AvroCodec(o.String("avro.codec")))
		}
		f := file.AvroBulk(text, opts...)
		if f.Err() != nil && file.AvroBulk(text).Err() == nil {
			option = "avro.codec"
		}
		return f, option
	default:
		var opts []file.ParquetOption
		if o.Has("parquet.compression") {
			opts = append(opts, file.ParquetCompression(o.String("parquet.compression")))
		}
		if o.Has("parquet.row-group-size") {
			opts = append(opts, file.ParquetRowGroupSize(o.Int("parquet.row-group-size")))
		}
		f := file.ParquetBulk(text, opts...)
		if f.Err() != nil && file.ParquetBulk(text).Err() == nil {
			option = "parquet.compression"
		}
		return f, option
	}
}

// partSpec is one item of partition-by: the directory level name=value
// of a field's value, or of a time (a field's or meta.timestamp)
// formatted with a Go layout.
type partSpec struct {
	name   string
	layout string // "" = the field's value as it is
	field  string // "meta.timestamp" = the record's timestamp
}

func (p partSpec) meta() bool { return p.field == "meta.timestamp" }

// parsePartitionBy parses partition-by items: "field" (the directory
// field=<value>) or "name=<Go time layout>@<field or meta.timestamp>"
// (the directory name=<the time formatted in UTC>).
func parsePartitionBy(items []string) ([]partSpec, error) {
	var out []partSpec
	seen := map[string]bool{}
	for i, it := range items {
		var p partSpec
		name, rest, isTime := strings.Cut(it, "=")
		if isTime {
			at := strings.LastIndex(rest, "@")
			if at < 0 {
				return nil, fmt.Errorf("item %d: want name=<Go time layout>@<field or meta.timestamp>, e.g. dt=2006-01-02@meta.timestamp (the @ is missing)", i+1)
			}
			p = partSpec{name: name, layout: rest[:at], field: rest[at+1:]}
			if p.layout == "" {
				return nil, fmt.Errorf("item %d: the time layout is empty (e.g. 2006-01-02 or 15)", i+1)
			}
			if t := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC); t.Format(p.layout) == time.Date(2011, 12, 13, 14, 15, 16, 0, time.UTC).Format(p.layout) {
				return nil, fmt.Errorf("item %d: the layout %q has no element of Go's reference time (2006-01-02 15:04:05)", i+1, p.layout)
			}
		} else {
			p = partSpec{name: it, field: it}
		}
		switch {
		case p.name == "":
			return nil, fmt.Errorf("item %d: the partition name is empty", i+1)
		case p.field == "":
			return nil, fmt.Errorf("item %d (%s): the field is empty", i+1, p.name)
		case strings.HasPrefix(p.field, "meta.") && !(p.meta() && p.layout != ""):
			return nil, fmt.Errorf("item %d (%s): of the metadata only meta.timestamp, with a layout (name=<layout>@meta.timestamp), names a partition", i+1, p.name)
		case strings.ContainsAny(p.name, "/\\"):
			return nil, fmt.Errorf("item %d: the partition name %q has a path separator", i+1, p.name)
		case seen[p.name]:
			return nil, fmt.Errorf("item %d: partition %s is named twice", i+1, p.name)
		}
		seen[p.name] = true
		out = append(out, p)
	}
	return out, nil
}

// readsFields reports whether a partition reads a field of the value.
func readsFields(ps []partSpec) bool {
	for _, p := range ps {
		if !p.meta() {
			return true
		}
	}
	return false
}

// recordPartitions is the bucket assigner of partition-by: Hive-style
// directories (file.HivePartitionsOf) of the record's value and
// meta.timestamp. A record without a timestamp goes to
// __HIVE_DEFAULT_PARTITION__ like a missing field.
func recordPartitions(ps []partSpec) file.BucketAssigner[Record] {
	with := make([]file.HivePart, len(ps))
	without := make([]file.HivePart, len(ps))
	for i, p := range ps {
		switch {
		case p.meta():
			with[i] = file.HiveTime(p.name, p.layout, "")
			without[i] = file.HiveTime(p.name, p.layout, "\x00none") // never a key: the default partition
		case p.layout != "":
			with[i] = file.HiveTime(p.name, p.layout, p.field)
			without[i] = with[i]
		default:
			with[i] = file.HiveField(p.field)
			without[i] = with[i]
		}
	}
	aWith, aWithout := file.HivePartitionsOf(with...), file.HivePartitionsOf(without...)
	fields := readsFields(ps)
	return file.BucketFunc[Record](func(r Record, c file.BucketContext) (string, error) {
		var m map[string]any
		if fields {
			if !r.Decoded() {
				var err error
				if r, err = r.Decode(context.Background()); err != nil {
					return "", fmt.Errorf("partition-by: decode the value: %w", err)
				}
			}
			m, _ = r.Object()
		}
		if ts := r.Timestamp(); !ts.IsZero() {
			c.Timestamp, c.HasTimestamp = ts.UnixMilli(), true
			return aWith.Bucket(m, c)
		}
		return aWithout.Bucket(m, c)
	})
}

// fileSinkStep is the file sink's Step: for avro and parquet, and for
// partition-by reading fields, it decodes the value and checks it is an
// object; for avro and parquet it checks the object against the schema
// (as the writer would coerce it), so that a record that does not fit
// fails under the pipeline's on-error naming the field and the record's
// position, or goes to the dead letters. nil when there is nothing to do.
func fileSinkStep(name string, o Options) (func(Record) (Record, error), bool, error) {
	f := o.String("format")
	ps, err := parsePartitionBy(o.Strings("partition-by"))
	if err != nil {
		return nil, false, optErr("partition-by", "%v", err)
	}
	if !isBulkFormat(f) && !readsFields(ps) {
		return nil, false, nil
	}
	var check func(map[string]any) error
	if isBulkFormat(f) {
		text, _, err := schemaText(o)
		if err != nil {
			return nil, false, err
		}
		// ParquetBulk coerces values as AvroBulk does.
		check = file.AvroBulk(text).Check
	}
	return func(r Record) (Record, error) {
		var err error
		if r, err = r.Decode(context.Background()); err != nil {
			return r, &SinkExprError{Sink: name, Option: "format", Pos: r.Pos().Resolve(), Err: fmt.Errorf("decode the value: %w", err)}
		}
		m, ok := r.Object()
		if !ok {
			opt := "format"
			if !isBulkFormat(f) {
				opt = "partition-by"
			}
			return r, &SinkExprError{Sink: name, Option: opt, Pos: r.Pos().Resolve(),
				Err: fmt.Errorf("the value is a %s, not an object", format.KindOf(r.Value()))}
		}
		if check != nil {
			if err := check(m); err != nil {
				return r, &SinkExprError{Sink: name, Option: "schema", Pos: r.Pos().Resolve(), Err: err}
			}
		}
		return r, nil
	}, true, nil
}

// recordBulk writes records' object values with a bulk format.
type recordBulk struct {
	f    file.BulkFormat[map[string]any]
	sink string
}

func (b recordBulk) NewWriter(w io.Writer) (file.BulkWriter[Record], error) {
	bw, err := b.f.NewWriter(w)
	if err != nil {
		return nil, err
	}
	return recordBulkWriter{bw, b.sink}, nil
}

type recordBulkWriter struct {
	w    file.BulkWriter[map[string]any]
	sink string
}

// Write writes r's value, which must be an object. Its errors are
// deterministic (the record does not fit the schema): they name the
// record's position and fail the job without restarts.
func (w recordBulkWriter) Write(r Record) error {
	if !r.Decoded() {
		var err error
		if r, err = r.Decode(context.Background()); err != nil {
			return &SinkExprError{Sink: w.sink, Option: "format", Pos: r.Pos().Resolve(), Err: fmt.Errorf("decode the value: %w", err)}
		}
	}
	m, ok := r.Object()
	if !ok {
		return &SinkExprError{Sink: w.sink, Option: "format", Pos: r.Pos().Resolve(), Err: fmt.Errorf("the value is a %s, not an object", format.KindOf(r.Value()))}
	}
	if err := w.w.Write(m); err != nil {
		return &SinkExprError{Sink: w.sink, Option: "schema", Pos: r.Pos().Resolve(), Err: err}
	}
	return nil
}

func (w recordBulkWriter) Finish() error { return w.w.Finish() }

// objectFile reads a whole-file format (Avro, Parquet) into decoded
// records.
type objectFile struct {
	f file.RandomAccessFormat[map[string]any]
}

func (o objectFile) Splittable() bool { return o.f.Splittable() }

func (o objectFile) NewReader(r io.Reader, offset int64) (file.RecordReader[Record], error) {
	rr, err := o.f.NewReader(r, offset)
	if err != nil {
		return nil, err
	}
	return objectReader{rr}, nil
}

func (o objectFile) NewReaderAt(r io.ReaderAt, size, offset, skip int64) (file.RecordReader[Record], error) {
	rr, err := o.f.NewReaderAt(r, size, offset, skip)
	if err != nil {
		return nil, err
	}
	return objectReader{rr}, nil
}

// objectFileFormat is the file source's format for avro and parquet.
func objectFileFormat(o Options) (file.Format[Record], error) {
	if o.String("format") == "parquet" {
		return objectFile{file.ParquetFile().(file.RandomAccessFormat[map[string]any])}, nil
	}
	text, opt, err := schemaText(o)
	if err != nil {
		return nil, optErr(opt, "%v", err)
	}
	f := file.AvroFile(text)
	if err := f.Err(); err != nil {
		return nil, optErr(opt, "%v", err)
	}
	return objectFile{f}, nil
}
