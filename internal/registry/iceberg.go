package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/iceberg"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/stream"
)

// The Iceberg sink's options (connectors/iceberg). Their defaults are the
// library's.
var icebergSinkOptions = []Option{
	{Name: "catalog", Type: Enum, Values: []string{"sql", "rest"}, Default: "sql",
		Description: "the Iceberg catalog: sql (Iceberg's SQL catalog, as PyIceberg's SqlCatalog and Java's JdbcCatalog keep it, in a SQLite file or a PostgreSQL database) or rest (an Iceberg REST catalog server; tested against Apache Iceberg's RESTCatalogServer)"},
	{Name: "uri", Type: String, Required: true, Secret: true,
		Description: "sql: the catalog database, a SQLite file (/var/lib/sluice/catalog.db, created when missing) or a postgres:// URL; rest: the server's URL (http://127.0.0.1:8181). It may hold a password, so it is never shown: use ${VAR}"},
	{Name: "catalog-name", Type: String, Default: "default",
		Description: "the catalog's name (the SQL catalog's catalog_name column; PyIceberg's default is \"default\")"},
	{Name: "warehouse", Type: String, Default: "",
		Description: "where new tables keep their files: a directory (made a file:// URL) or an s3:// URL (with properties.s3.*); sql needs it to create tables; rest: sent to the server, empty = the server's default"},
	{Name: "table", Type: String, Required: true, Check: checkIcebergTable,
		Description: "the table, namespace.table (or ns1.ns2.table); it must exist unless auto-create is set"},
	{Name: "auto-create", Type: Bool, Default: false,
		Description: "create the table (and its namespace) from schema and partition when it does not exist; without schema, from the first record's fields (types from the values); an existing table is used as it is"},
	{Name: "schema", Type: Strings, Default: []string{},
		Description: "auto-create: the columns, each \"name type\" or \"name type not null\", types boolean, int, long, float, double, string, binary, date, timestamp, timestamptz (e.g. [id long not null, name string, ts timestamptz]); empty = the first record's fields, all optional: boolean, long (a number without fraction), double, string, and event-time-column as timestamptz"},
	{Name: "add-columns", Type: Bool, Default: false,
		Description: "schema evolution: a record field that is not a column of the table is added as an optional column (type from its value) through the catalog; off = such a field fails the job, naming it"},
	{Name: "partition", Type: Strings, Default: []string{},
		Description: "auto-create: the partition spec, fields such as region (identity), day(ts), hour(ts), month(ts), year(ts), bucket(16, id), truncate(4, name) (quote items with a comma in YAML: \"bucket(16, id)\"); empty = unpartitioned"},
	{Name: "event-time-column", Type: String, Default: "",
		Description: "a timestamp, timestamptz, date or long column filled with the record's timestamp (a Kafka record's timestamp) when the record has no value for it, for day/hour partitions by event time; empty = none"},
	{Name: "file-size", Type: Int, Default: int64(64 << 20), Check: Between(1024, 1<<40),
		Description: "bytes of rows (in memory, before Parquet encoding and compression: files are smaller) a writer buffers before it writes them as data files; it also writes what it holds at every checkpoint"},
	{Name: "commit-retries", Type: Int, Default: int64(10), Check: Between(0, 1000),
		Description: "how often the global committer retries a snapshot commit that conflicted with another writer (on fresh table metadata, 100 ms doubling to 5 s between tries) before the job fails and restarts"},
	{Name: "compaction", Type: Int, Default: int64(0), Check: Between(0, 100000),
		Description: "small-file compaction: every N checkpoints the sink committed, rewrite the data files those N checkpoints added into files of file-size per partition, in one atomic replace snapshot (readers see the small or the merged files, never both); 0 = off"},
	{Name: "properties.*", Type: String,
		Description: "catalog and file IO properties passed to iceberg-go, e.g. properties.s3.endpoint: http://127.0.0.1:7070, properties.s3.force-virtual-addressing: \"false\" (path-style, the default), properties.s3.region, properties.s3.access-key-id, properties.s3.secret-access-key (use ${VAR}), properties.credential or properties.token for rest"},
}

func init() {
	MustRegisterSink(Sink{
		Name: "iceberg",
		Description: "Appends each record's fields as a row to an Apache Iceberg table: Parquet data files per checkpoint, " +
			"one table snapshot per checkpoint committed by the sink's global committer, exactly once across restarts " +
			"(append only: no upserts or deletes) (connectors/iceberg).",
		ExactlyOnce: true,
		Options:     icebergSinkOptions,
		Validate:    validateIcebergSink,
		Step: func(name string, _ Options) (func(Record) (Record, error), bool, error) {
			return icebergStep(name), true, nil
		},
		Build: buildIcebergSink,
	})
}

func checkIcebergTable(v any) error {
	s, _ := v.(string)
	_, err := iceberg.ParseIdentifier(s)
	return err
}

// validateIcebergSink checks rules across options, each reported at an
// option's line.
func validateIcebergSink(o Options) error {
	create := o.Bool("auto-create")
	if !create {
		for _, name := range []string{"schema", "partition"} {
			if len(o.Strings(name)) > 0 {
				return &OptionError{Option: name, Err: errors.New("only with auto-create: true (an existing table's own is used)")}
			}
		}
	}
	if create && len(o.Strings("schema")) == 0 { // columns from the first record
		if _, err := iceberg.ParsePartitionSpec(o.Strings("partition")...); err != nil {
			return &OptionError{Option: "partition", Err: err}
		}
	} else if create {
		cols, err := iceberg.ParseColumns(o.Strings("schema")...)
		if err != nil {
			return &OptionError{Option: "schema", Err: err}
		}
		part, err := iceberg.ParsePartitionSpec(o.Strings("partition")...)
		if err != nil {
			return &OptionError{Option: "partition", Err: err}
		}
		if err := iceberg.CheckTable(cols, part); err != nil {
			return &OptionError{Option: "partition", Err: err}
		}
	}
	if create && o.String("catalog") == "sql" && o.String("warehouse") == "" {
		return &OptionError{Option: "warehouse", Err: errors.New("the sql catalog needs a warehouse to create a table in")}
	}
	uri := o.String("uri")
	switch o.String("catalog") {
	case "rest":
		if !strings.HasPrefix(uri, "http://") && !strings.HasPrefix(uri, "https://") {
			return &OptionError{Option: "uri", Err: errors.New("the rest catalog needs an http:// or https:// URL (value not shown)")}
		}
	default:
		if strings.Contains(uri, "://") && !strings.HasPrefix(uri, "postgres://") && !strings.HasPrefix(uri, "postgresql://") {
			return &OptionError{Option: "uri", Err: errors.New("the sql catalog needs a SQLite file or a postgres:// URL (value not shown)")}
		}
	}
	return nil
}

func buildIcebergSink(c BuildContext, in stream.DataStream[Record]) error {
	o := c.Options
	ident, err := iceberg.ParseIdentifier(o.String("table"))
	if err != nil {
		return err
	}
	props := map[string]string{}
	for _, kv := range o.Prefixed("properties.") {
		props[strings.TrimPrefix(kv.Key, "properties.")] = kv.Value
	}
	var cat iceberg.Catalog
	if o.String("catalog") == "rest" {
		cat = iceberg.RESTCatalog(o.String("catalog-name"), o.String("uri"), o.String("warehouse"), props)
	} else {
		cat = iceberg.SQLCatalog(o.String("catalog-name"), o.String("uri"), o.String("warehouse"), props)
	}
	opts := []iceberg.Option{iceberg.TargetFileSize(o.Int("file-size")),
		iceberg.CommitRetries(int(o.Int("commit-retries")), 100*time.Millisecond), iceberg.Logger(c.Logger)}
	if o.Bool("auto-create") {
		part, err := iceberg.ParsePartitionSpec(o.Strings("partition")...)
		if err != nil {
			return err
		}
		if len(o.Strings("schema")) == 0 {
			opts = append(opts, iceberg.CreateTableFromRecords(part, nil))
		} else {
			cols, err := iceberg.ParseColumns(o.Strings("schema")...)
			if err != nil {
				return err
			}
			opts = append(opts, iceberg.CreateTable(cols, part, nil))
		}
	}
	if o.Bool("add-columns") {
		opts = append(opts, iceberg.AddColumns(true))
	}
	if n := o.Int("compaction"); n > 0 {
		opts = append(opts, iceberg.Compaction(int(n)))
	}
	evCol := o.String("event-time-column")
	step := icebergStep(c.Name)
	row := func(r Record) (iceberg.Row, error) {
		if !c.StepApplied || !r.Decoded() {
			var err error
			if r, err = step(r); err != nil {
				return nil, unrecoverable{err}
			}
		}
		m, _ := r.Object()
		if evCol != "" && m[evCol] == nil {
			if ts := r.Timestamp(); !ts.IsZero() {
				m = cloneWith(m, evCol, ts.UTC())
			}
		}
		return m, nil
	}
	s, err := iceberg.NewSink(cat, ident, row, opts...)
	if err != nil {
		return err
	}
	stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
	return nil
}

// cloneWith returns a copy of m with k set to v (m may be shared with
// other records' values).
func cloneWith(m map[string]any, k string, v any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for kk, vv := range m {
		out[kk] = vv
	}
	out[k] = v
	return out
}

// icebergStep decodes a record's value and checks that it is an object,
// whose fields are the row's columns.
func icebergStep(sink string) func(Record) (Record, error) {
	return func(r Record) (Record, error) {
		r, err := r.Decode(context.Background())
		if err != nil {
			return r, fmt.Errorf("iceberg sink %s: decode the value: %w", sink, err)
		}
		if _, ok := r.Object(); !ok {
			at := ""
			if p := describePosition(r); p != "" {
				at = " at " + p
			}
			return r, fmt.Errorf("iceberg sink %s: the record%s is a %s, not an object: a row's columns are an object's fields", sink, at, format.KindOf(r.Value()))
		}
		return r, nil
	}
}
