package iceberg

import (
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// committable is what a writer hands over at a checkpoint: the data files
// it wrote since the previous one, all of them durable and none referenced
// by the table yet. The global committer appends the files of one
// checkpoint in one snapshot.
type committable struct {
	// Checkpoint is the checkpoint the files were prepared at; the global
	// committer groups by it (a restore may hand over several checkpoints'
	// committables under a later id).
	Checkpoint int64 `json:"checkpoint"`
	// Subtask is the writer that wrote the files, for messages.
	Subtask int        `json:"subtask"`
	Files   []fileDesc `json:"files"`
}

// fileDesc describes one Parquet data file: what the snapshot's manifest
// entry needs (path, record count, size, partition, column statistics).
type fileDesc struct {
	Path    string `json:"path"`
	Records int64  `json:"records"`
	Size    int64  `json:"size"`
	SpecID  int    `json:"spec_id"`
	// Partition holds the partition tuple by partition field id.
	Partition map[int]partValue `json:"partition,omitempty"`
	// LogicalTypes are the partition fields' Avro logical types (date,
	// timestamp-micros, …), by partition field id.
	LogicalTypes map[int]string `json:"logical_types,omitempty"`
	ColumnSizes  map[int]int64  `json:"column_sizes,omitempty"`
	ValueCounts  map[int]int64  `json:"value_counts,omitempty"`
	NullCounts   map[int]int64  `json:"null_counts,omitempty"`
	NaNCounts    map[int]int64  `json:"nan_counts,omitempty"`
	LowerBounds  map[int][]byte `json:"lower_bounds,omitempty"`
	UpperBounds  map[int][]byte `json:"upper_bounds,omitempty"`
	SplitOffsets []int64        `json:"split_offsets,omitempty"`
	SortOrderID  *int           `json:"sort_order_id,omitempty"`
}

// partValue is one partition value with its Go type, so that it comes
// back from a checkpoint as the same type iceberg-go produced.
type partValue struct {
	Type  string `json:"t"`
	Value string `json:"v,omitempty"`
}

// describeFile turns a data file iceberg-go wrote into its description.
func describeFile(df iceberg.DataFile) (fileDesc, error) {
	d := fileDesc{
		Path: df.FilePath(), Records: df.Count(), Size: df.FileSizeBytes(), SpecID: int(df.SpecID()),
		ColumnSizes: maps.Clone(df.ColumnSizes()), ValueCounts: maps.Clone(df.ValueCounts()),
		NullCounts: maps.Clone(df.NullValueCounts()), NaNCounts: maps.Clone(df.NaNValueCounts()),
		LowerBounds: maps.Clone(df.LowerBoundValues()), UpperBounds: maps.Clone(df.UpperBoundValues()),
		SplitOffsets: slices.Clone(df.SplitOffsets()), SortOrderID: df.SortOrderID(),
	}
	if df.FileFormat() != iceberg.ParquetFile || df.ContentType() != iceberg.EntryContentData {
		return d, fmt.Errorf("data file %s: format %s, content %s; want a Parquet data file", d.Path, df.FileFormat(), df.ContentType())
	}
	if p := df.Partition(); len(p) > 0 {
		d.Partition = make(map[int]partValue, len(p))
		for id, v := range p {
			pv, err := encodePartValue(v)
			if err != nil {
				return d, fmt.Errorf("data file %s: partition field %d: %w", d.Path, id, err)
			}
			d.Partition[id] = pv
		}
	}
	return d, nil
}

// dataFile rebuilds the iceberg.DataFile of d for spec.
func (d fileDesc) dataFile(spec iceberg.PartitionSpec, logical map[int]string) (iceberg.DataFile, error) {
	var part map[int]any
	if len(d.Partition) > 0 {
		part = make(map[int]any, len(d.Partition))
		for id, pv := range d.Partition {
			v, err := pv.decode()
			if err != nil {
				return nil, fmt.Errorf("data file %s: partition field %d: %w", d.Path, id, err)
			}
			part[id] = v
		}
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, d.Path, iceberg.ParquetFile,
		part, logical, nil, d.Records, d.Size)
	if err != nil {
		return nil, fmt.Errorf("data file %s: %w", d.Path, err)
	}
	b.ColumnSizes(d.ColumnSizes).ValueCounts(d.ValueCounts).NullValueCounts(d.NullCounts).
		NaNValueCounts(d.NaNCounts).LowerBoundValues(d.LowerBounds).UpperBoundValues(d.UpperBounds)
	if len(d.SplitOffsets) > 0 {
		b.SplitOffsets(d.SplitOffsets)
	}
	if d.SortOrderID != nil {
		b.SortOrderID(*d.SortOrderID)
	}
	return b.Build(), nil
}

// partitionLogicalTypes maps the partition fields of spec whose result
// type needs an Avro logical type in the manifest to that type, as
// iceberg-go's own writer does.
func partitionLogicalTypes(spec iceberg.PartitionSpec, schema *iceberg.Schema) map[int]string {
	out := map[int]string{}
	for _, f := range spec.Fields() {
		src, ok := schema.FindFieldByID(f.SourceID())
		if !ok {
			continue
		}
		switch f.Transform.ResultType(src.Type).(type) {
		case iceberg.DateType:
			out[f.FieldID] = "date"
		case iceberg.TimeType:
			out[f.FieldID] = "time-micros"
		case iceberg.TimestampType, iceberg.TimestampTzType:
			out[f.FieldID] = "timestamp-micros"
		case iceberg.UUIDType:
			out[f.FieldID] = "uuid"
		}
	}
	return out
}

func encodePartValue(v any) (partValue, error) {
	switch x := v.(type) {
	case nil:
		return partValue{Type: "null"}, nil
	case bool:
		return partValue{"bool", strconv.FormatBool(x)}, nil
	case int32:
		return partValue{"int32", strconv.FormatInt(int64(x), 10)}, nil
	case int64:
		return partValue{"int64", strconv.FormatInt(x, 10)}, nil
	case int:
		return partValue{"int", strconv.Itoa(x)}, nil
	case float32:
		return partValue{"float32", strconv.FormatFloat(float64(x), 'g', -1, 32)}, nil
	case float64:
		return partValue{"float64", strconv.FormatFloat(x, 'g', -1, 64)}, nil
	case string:
		return partValue{"string", x}, nil
	case []byte:
		return partValue{"bytes", base64.StdEncoding.EncodeToString(x)}, nil
	case iceberg.Date:
		return partValue{"date", strconv.FormatInt(int64(x), 10)}, nil
	case iceberg.Time:
		return partValue{"time", strconv.FormatInt(int64(x), 10)}, nil
	case iceberg.Timestamp:
		return partValue{"timestamp", strconv.FormatInt(int64(x), 10)}, nil
	case uuid.UUID:
		return partValue{"uuid", x.String()}, nil
	}
	return partValue{}, fmt.Errorf("partition value %v of type %T is not supported", v, v)
}

func (p partValue) decode() (any, error) {
	bad := func(err error) (any, error) {
		return nil, fmt.Errorf("partition value %q of type %s: %w", p.Value, p.Type, err)
	}
	switch p.Type {
	case "null":
		return nil, nil
	case "bool":
		b, err := strconv.ParseBool(p.Value)
		if err != nil {
			return bad(err)
		}
		return b, nil
	case "int32", "int64", "int", "date", "time", "timestamp":
		n, err := strconv.ParseInt(p.Value, 10, 64)
		if err != nil {
			return bad(err)
		}
		switch p.Type {
		case "int32":
			return int32(n), nil
		case "int64":
			return n, nil
		case "int":
			return int(n), nil
		case "date":
			return iceberg.Date(n), nil
		case "time":
			return iceberg.Time(n), nil
		default:
			return iceberg.Timestamp(n), nil
		}
	case "float32", "float64":
		f, err := strconv.ParseFloat(p.Value, 64)
		if err != nil {
			return bad(err)
		}
		if p.Type == "float32" {
			return float32(f), nil
		}
		return f, nil
	case "string":
		return p.Value, nil
	case "bytes":
		b, err := base64.StdEncoding.DecodeString(p.Value)
		if err != nil {
			return bad(err)
		}
		return b, nil
	case "uuid":
		u, err := uuid.Parse(p.Value)
		if err != nil {
			return bad(err)
		}
		return u, nil
	}
	return bad(fmt.Errorf("unknown type"))
}
