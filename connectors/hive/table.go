package hive

import (
	"context"
	"errors"
	"fmt"

	hms "github.com/beltran/gohive/hive_metastore"
)

// Column is a table column: a name and a Hive type ("string", "bigint",
// "double", "timestamp", ...).
type Column struct {
	Name, Type string
}

// Format is a table's storage format: the input and output format and the
// serde classes that readers (Hive, Spark, Trino) use for its files.
type Format struct {
	InputFormat, OutputFormat, SerDe string
}

// Storage formats of the files the file sink writes.
var (
	// JSONLines: one JSON object a line (the file sink's "json" format).
	JSONLines = Format{
		InputFormat:  "org.apache.hadoop.mapred.TextInputFormat",
		OutputFormat: "org.apache.hadoop.hive.ql.io.HiveIgnoreKeyTextOutputFormat",
		SerDe:        "org.apache.hadoop.hive.serde2.JsonSerDe",
	}
	// Parquet files (the file sink's "parquet" format).
	Parquet = Format{
		InputFormat:  "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
		OutputFormat: "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
		SerDe:        "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
	}
)

// TableSpec describes an external table for [Client.CreateExternalTable].
type TableSpec struct {
	DB, Name string
	// Location is the table's base directory (the file sink's path).
	Location string
	// Columns are the data columns; PartitionKeys the partition columns,
	// in directory order (usually of type "string").
	Columns, PartitionKeys []Column
	// Format defaults to [JSONLines].
	Format Format
}

// CreateDatabase creates a database; one that exists already is no error.
func (c *Client) CreateDatabase(ctx context.Context, name, location string) error {
	db := hms.NewDatabase()
	db.Name, db.LocationUri = name, location
	db.Parameters = map[string]string{}
	err := c.Do(ctx, "create_database "+name, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		return ms.CreateDatabase(ctx, db)
	})
	var exists *hms.AlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("hive: create_database %s on %s: %w", name, c.addr, err)
	}
	return nil
}

// CreateExternalTable creates an external table (the metastore never
// deletes its files); one that exists already is no error.
func (c *Client) CreateExternalTable(ctx context.Context, spec TableSpec) error {
	if spec.DB == "" || spec.Name == "" || spec.Location == "" {
		return fmt.Errorf("%w: CreateExternalTable needs DB, Name and Location (got %q.%q at %q)", ErrInvalidConfig, spec.DB, spec.Name, spec.Location)
	}
	f := spec.Format
	if f == (Format{}) {
		f = JSONLines
	}
	cols := func(cs []Column) []*hms.FieldSchema {
		out := make([]*hms.FieldSchema, 0, len(cs))
		for _, c := range cs {
			out = append(out, &hms.FieldSchema{Name: c.Name, Type: c.Type})
		}
		return out
	}
	sd := hms.NewStorageDescriptor()
	sd.Cols = cols(spec.Columns)
	sd.Location = spec.Location
	sd.InputFormat, sd.OutputFormat = f.InputFormat, f.OutputFormat
	sd.SerdeInfo = &hms.SerDeInfo{Name: spec.Name, SerializationLib: f.SerDe, Parameters: map[string]string{}}
	sd.NumBuckets = -1
	sd.BucketCols, sd.SortCols, sd.Parameters = []string{}, []*hms.Order{}, map[string]string{}
	t := hms.NewTable()
	t.DbName, t.TableName = spec.DB, spec.Name
	t.Sd = sd
	t.PartitionKeys = cols(spec.PartitionKeys)
	t.TableType = "EXTERNAL_TABLE"
	t.Parameters = map[string]string{"EXTERNAL": "TRUE"}
	t.Owner = "sluice"
	err := c.Do(ctx, "create_table "+spec.DB+"."+spec.Name, func(ctx context.Context, ms *hms.ThriftHiveMetastoreClient) error {
		return ms.CreateTable(ctx, t)
	})
	var exists *hms.AlreadyExistsException
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("hive: create_table %s.%s on %s: %w", spec.DB, spec.Name, c.addr, err)
	}
	return nil
}
