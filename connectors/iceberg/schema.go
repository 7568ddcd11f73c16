package iceberg

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go"
)

// Column is one top-level column of a table the sink creates: see
// [CreateTable].
type Column struct {
	Name string
	// Type is one of boolean, int, long, float, double, string, binary,
	// date, timestamp, timestamptz (the Iceberg type names).
	Type string
	// Required makes the column non-nullable.
	Required bool
}

// ParseColumns parses column declarations "name type" or "name type not
// null" (also "name:type"), for example "id long not null", "ts
// timestamptz".
func ParseColumns(decls ...string) ([]Column, error) {
	out := make([]Column, 0, len(decls))
	seen := map[string]bool{}
	for i, d := range decls {
		f := strings.Fields(strings.Replace(strings.TrimSpace(d), ":", " ", 1))
		if len(f) < 2 {
			return nil, fmt.Errorf("%w: column %d %q: want \"name type\" or \"name type not null\"", ErrInvalidConfig, i+1, d)
		}
		c := Column{Name: f[0], Type: strings.ToLower(f[1])}
		switch rest := strings.ToLower(strings.Join(f[2:], " ")); rest {
		case "":
		case "not null", "required":
			c.Required = true
		default:
			return nil, fmt.Errorf("%w: column %d %q: unexpected %q after the type (want nothing or \"not null\")", ErrInvalidConfig, i+1, d, rest)
		}
		if _, err := columnType(c.Type); err != nil {
			return nil, fmt.Errorf("%w: column %d %q: %w", ErrInvalidConfig, i+1, d, err)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("%w: column %q declared twice", ErrInvalidConfig, c.Name)
		}
		seen[c.Name] = true
		out = append(out, c)
	}
	return out, nil
}

func columnType(t string) (iceberg.Type, error) {
	switch t {
	case "boolean", "bool":
		return iceberg.PrimitiveTypes.Bool, nil
	case "int", "integer":
		return iceberg.PrimitiveTypes.Int32, nil
	case "long", "bigint":
		return iceberg.PrimitiveTypes.Int64, nil
	case "float":
		return iceberg.PrimitiveTypes.Float32, nil
	case "double":
		return iceberg.PrimitiveTypes.Float64, nil
	case "string":
		return iceberg.PrimitiveTypes.String, nil
	case "binary":
		return iceberg.PrimitiveTypes.Binary, nil
	case "date":
		return iceberg.PrimitiveTypes.Date, nil
	case "timestamp":
		return iceberg.PrimitiveTypes.Timestamp, nil
	case "timestamptz":
		return iceberg.PrimitiveTypes.TimestampTz, nil
	}
	return nil, fmt.Errorf("type %q is not supported: use boolean, int, long, float, double, string, binary, date, timestamp or timestamptz", t)
}

// schemaOf builds the Iceberg schema of cols, field ids from 1.
func schemaOf(cols []Column) (*iceberg.Schema, error) {
	fields := make([]iceberg.NestedField, len(cols))
	for i, c := range cols {
		t, err := columnType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("%w: column %q: %w", ErrInvalidConfig, c.Name, err)
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: t, Required: c.Required}
	}
	return iceberg.NewSchema(0, fields...), nil
}

// PartitionField is one field of the partition spec of a table the sink
// creates: a transform of a source column.
type PartitionField struct {
	Column string
	// Transform is an Iceberg transform: identity, year, month, day,
	// hour, bucket[N], truncate[W].
	Transform string
}

// ParsePartitionSpec parses partition fields written as transform calls:
// "region" or "identity(region)", "day(ts)", "hour(ts)", "month(ts)",
// "year(ts)", "bucket(16, id)", "truncate(4, name)".
func ParsePartitionSpec(fields ...string) ([]PartitionField, error) {
	out := make([]PartitionField, 0, len(fields))
	for i, s := range fields {
		s = strings.TrimSpace(s)
		open := strings.IndexByte(s, '(')
		if open < 0 {
			if s == "" || strings.ContainsAny(s, ") ,") {
				return nil, fmt.Errorf("%w: partition field %d %q: want a column or transform(column)", ErrInvalidConfig, i+1, s)
			}
			out = append(out, PartitionField{Column: s, Transform: "identity"})
			continue
		}
		if !strings.HasSuffix(s, ")") {
			return nil, fmt.Errorf("%w: partition field %d %q: missing \")\"", ErrInvalidConfig, i+1, s)
		}
		name := strings.ToLower(strings.TrimSpace(s[:open]))
		args := strings.Split(s[open+1:len(s)-1], ",")
		for j := range args {
			args[j] = strings.TrimSpace(args[j])
		}
		var f PartitionField
		switch name {
		case "identity", "year", "month", "day", "hour", "years", "months", "days", "hours":
			if len(args) != 1 || args[0] == "" {
				return nil, fmt.Errorf("%w: partition field %d %q: %s takes one column", ErrInvalidConfig, i+1, s, name)
			}
			f = PartitionField{Column: args[0], Transform: strings.TrimSuffix(name, "s")}
		case "bucket", "truncate":
			if len(args) != 2 || args[1] == "" {
				return nil, fmt.Errorf("%w: partition field %d %q: %s takes a number and a column: %s(16, id)", ErrInvalidConfig, i+1, s, name, name)
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return nil, fmt.Errorf("%w: partition field %d %q: %q is not a positive number", ErrInvalidConfig, i+1, s, args[0])
			}
			f = PartitionField{Column: args[1], Transform: fmt.Sprintf("%s[%d]", name, n)}
		default:
			return nil, fmt.Errorf("%w: partition field %d %q: unknown transform %q (identity, year, month, day, hour, bucket, truncate)", ErrInvalidConfig, i+1, s, name)
		}
		out = append(out, f)
	}
	return out, nil
}

// specOf builds the partition spec of fields over schema.
func specOf(fields []PartitionField, schema *iceberg.Schema) (iceberg.PartitionSpec, error) {
	if len(fields) == 0 {
		return *iceberg.UnpartitionedSpec, nil
	}
	opts := make([]iceberg.PartitionOption, 0, len(fields))
	for _, f := range fields {
		tr, err := iceberg.ParseTransform(f.Transform)
		if err != nil {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition %s(%s): %w", ErrInvalidConfig, f.Transform, f.Column, err)
		}
		src, ok := schema.FindFieldByName(f.Column)
		if !ok {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition %s(%s): no column %q in the schema", ErrInvalidConfig, f.Transform, f.Column, f.Column)
		}
		if !tr.CanTransform(src.Type) {
			return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition %s(%s): transform %s does not apply to a %s column", ErrInvalidConfig, f.Transform, f.Column, f.Transform, src.Type)
		}
		name := f.Column
		if _, ident := tr.(iceberg.IdentityTransform); !ident {
			name = f.Column + "_" + strings.NewReplacer("[", "", "]", "").Replace(f.Transform)
		}
		opts = append(opts, iceberg.AddPartitionFieldByName(f.Column, name, tr, schema, nil))
	}
	spec, err := iceberg.NewPartitionSpecOpts(opts...)
	if err != nil {
		return iceberg.PartitionSpec{}, fmt.Errorf("%w: partition spec: %w", ErrInvalidConfig, err)
	}
	return spec, nil
}

// CheckTable reports whether columns and a partition spec over them make a
// table the sink can create (as [CreateTable] checks them).
func CheckTable(columns []Column, partition []PartitionField) error {
	sc, err := schemaOf(columns)
	if err != nil {
		return err
	}
	_, err = specOf(partition, sc)
	return err
}
