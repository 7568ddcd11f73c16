package iceberg

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// allTypesColumns has a column of every type the sink writes.
var allTypesColumns = []Column{
	{Name: "b", Type: "boolean"}, {Name: "i", Type: "int"}, {Name: "l", Type: "long", Required: true},
	{Name: "f", Type: "float"}, {Name: "d", Type: "double"}, {Name: "s", Type: "string"},
	{Name: "bin", Type: "binary"}, {Name: "dt", Type: "date"}, {Name: "ts", Type: "timestamp"},
	{Name: "tz", Type: "timestamptz"},
}

var allTypesPartition = []PartitionField{{Column: "tz", Transform: "day"}, {Column: "l", Transform: "bucket[3]"}, {Column: "s", Transform: "truncate[4]"}}

// allTypesRows are n rows with nulls, NaNs, ±0, infinities, strings and
// bytes longer than the bounds' 16 (non-ASCII ones too), over 3 days.
func allTypesRows(n int) []Row {
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := []string{"abcd", "abce", "zz", "ü€", ""}
	base := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	rows := make([]Row, n)
	for k := range rows {
		r := Row{"l": int64(k)*1000003 - 150_000_000}
		if k%3 != 0 {
			r["b"] = k%2 == 0
		}
		if k%7 != 0 {
			r["i"] = int64(rng.Int32N(1<<20) - 1<<19)
		}
		switch {
		case k%11 == 0:
			r["f"] = math.NaN()
		case k%13 != 0:
			r["f"] = float64(float32(rng.NormFloat64() * 100))
		}
		switch k % 17 {
		case 0:
			r["d"] = math.NaN()
		case 1:
			r["d"] = math.Copysign(0, -1)
		case 2:
			r["d"] = math.Inf(1)
		case 3:
		default:
			r["d"] = rng.NormFloat64() * 1e6
		}
		if k%5 != 0 {
			var sb strings.Builder
			sb.WriteString(prefixes[rng.IntN(len(prefixes))])
			for range rng.IntN(24) {
				sb.WriteRune([]rune("aZ09ü€𝄞~")[rng.IntN(8)])
			}
			r["s"] = sb.String()
		}
		if k%4 != 0 {
			p := make([]byte, rng.IntN(30))
			for j := range p {
				p[j] = byte(rng.IntN(256))
				if rng.IntN(4) == 0 {
					p[j] = 0xff
				}
			}
			r["bin"] = p
		}
		tm := base.Add(time.Duration(rng.Int64N(int64(72 * time.Hour))))
		r["dt"] = tm.Format(time.DateOnly)
		r["ts"] = tm.Add(time.Duration(k) * time.Microsecond)
		if k%9 != 0 {
			r["tz"] = tm.Format(time.RFC3339Nano)
		}
		rows[k] = r
	}
	return rows
}

// writtenFile is a data file as the manifest describes it and as its
// Parquet file holds it.
type writtenFile struct {
	df   iceberg.DataFile
	path string
}

func writeAllTypes(t *testing.T, dir string, arrow bool, rows []Row) (*table.Table, []writtenFile) {
	t.Helper()
	ctx := t.Context()
	cat, ident := testCatalog(dir), table.Identifier{"db", "all"}
	s, err := New(cat, ident, func(r Row) (Row, error) { return r, nil }, CreateTable(allTypesColumns, allTypesPartition, nil))
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.arrowWriter = arrow
	// two checkpoints: files of two writes per partition
	if err := rowSink(ctx, s, 1, rows[:len(rows)/2]...); err != nil {
		t.Fatal(err)
	}
	if err := rowSink(ctx, s, 2, rows[len(rows)/2:]...); err != nil {
		t.Fatal(err)
	}
	c, err := cat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeCatalog(c)
	tbl, err := c.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []writtenFile
	for _, task := range tasks {
		out = append(out, writtenFile{df: task.File, path: localPath(t, task.File.FilePath())})
	}
	return tbl, out
}

// TestParquetGoDataFiles writes rows of every column type into a
// partitioned table and checks each data file against its manifest entry:
// the Parquet schema has every column with the table's field id and the
// type the Iceberg spec maps it to; the record count, value, null and NaN
// counts and the lower and upper bounds (Iceberg's single-value binary
// form, strings and binary truncated to 16) are those of the values the
// file holds (read back with parquet-go), and its rows are in its
// partition. The same rows written by iceberg-go's Arrow writer give the
// same partitions with the same counts and bounds (floats aside:
// iceberg-go records no NaN counts). With SLUICE_PYICEBERG set, PyIceberg
// reads the table back and filters it on every bounded column (its file
// pruning uses the bounds: a wrong bound loses rows).
func TestParquetGoDataFiles(t *testing.T) {
	rows := allTypesRows(600)
	dir := t.TempDir()
	tbl, files := writeAllTypes(t, dir, false, rows)
	sc := tbl.Schema()
	var total int64
	type partKey string
	counts := map[partKey]int64{}
	bounds := map[partKey][]writtenFile{}
	for _, wf := range files {
		checkDataFile(t, sc, tbl.Spec(), wf)
		total += wf.df.Count()
		k := partKey(fmt.Sprint(sortedPartition(wf.df.Partition())))
		counts[k] += wf.df.Count()
		bounds[k] = append(bounds[k], wf)
	}
	if total != int64(len(rows)) {
		t.Fatalf("data files hold %d records, want %d", total, len(rows))
	}
	if len(counts) < 10 {
		t.Fatalf("only %d partitions: the test data should make more", len(counts))
	}

	// iceberg-go's Arrow writer on the same rows: the same partitions,
	// records and statistics (two files per partition at most, one per
	// checkpoint, in both; compared as the set of per-file statistics)
	_, arrowFiles := writeAllTypes(t, t.TempDir(), true, rows)
	arrowCounts := map[partKey]int64{}
	arrowStats := map[partKey][]string{}
	for _, wf := range arrowFiles {
		k := partKey(fmt.Sprint(sortedPartition(wf.df.Partition())))
		arrowCounts[k] += wf.df.Count()
		arrowStats[k] = append(arrowStats[k], fileStats(sc, wf.df))
	}
	if fmt.Sprint(counts) != fmt.Sprint(arrowCounts) {
		t.Fatalf("records by partition differ from iceberg-go's writer:\nparquet-go %v\narrow      %v", counts, arrowCounts)
	}
	for k, wfs := range bounds {
		var mine []string
		for _, wf := range wfs {
			mine = append(mine, fileStats(sc, wf.df))
		}
		slices.Sort(mine)
		slices.Sort(arrowStats[k])
		if !slices.Equal(mine, arrowStats[k]) {
			t.Errorf("partition %s: statistics differ from iceberg-go's writer:\nparquet-go %q\narrow      %q", k, mine, arrowStats[k])
		}
	}
	pyIcebergCheck(t, dir, rows)
}

// sortedPartition is a partition tuple as a comparable string.
func sortedPartition(p map[int]any) string {
	keys := slices.Sorted(func(yield func(int) bool) {
		for k := range p {
			if !yield(k) {
				return
			}
		}
	})
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "%d=%T:%v;", k, p[k], p[k])
	}
	return sb.String()
}

// fileStats is the record count and the statistics of the non-float
// columns of a data file.
func fileStats(sc *iceberg.Schema, df iceberg.DataFile) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "records=%d", df.Count())
	for _, f := range sc.Fields() {
		if f.Name == "f" || f.Name == "d" {
			continue
		}
		fmt.Fprintf(&sb, " %s: values=%d nulls=%d lo=%x hi=%x", f.Name, df.ValueCounts()[f.ID], df.NullValueCounts()[f.ID],
			df.LowerBoundValues()[f.ID], df.UpperBoundValues()[f.ID])
	}
	return sb.String()
}

// checkDataFile checks one data file's Parquet schema and values against
// its manifest entry.
func checkDataFile(t *testing.T, sc *iceberg.Schema, spec iceberg.PartitionSpec, wf writtenFile) {
	t.Helper()
	f, err := os.Open(wf.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != wf.df.FileSizeBytes() {
		t.Errorf("%s: %d bytes, the manifest says %d", wf.path, st.Size(), wf.df.FileSizeBytes())
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	// the schema: every column with its field id and type
	leafOf := map[int]int{} // field id → leaf column index
	for leaf, col := range pf.Root().Columns() {
		field, ok := sc.FindFieldByName(col.Name())
		if !ok {
			t.Fatalf("%s: column %q is not in the table", wf.path, col.Name())
		}
		if col.ID() != field.ID {
			t.Errorf("%s: column %s has field id %d, want %d", wf.path, col.Name(), col.ID(), field.ID)
		}
		if col.Optional() == field.Required {
			t.Errorf("%s: column %s optional=%v, the table's is required=%v", wf.path, col.Name(), col.Optional(), field.Required)
		}
		checkParquetType(t, wf.path, col, field.Type)
		leafOf[field.ID] = leaf
	}
	if len(leafOf) != len(sc.Fields()) {
		t.Fatalf("%s: %d columns, the table has %d", wf.path, len(leafOf), len(sc.Fields()))
	}
	// the values
	vals := map[int][]parquet.Value{}
	rd := parquet.NewReader(f, pf.Schema())
	defer rd.Close()
	buf := make([]parquet.Row, 64)
	var n int64
	for {
		k, err := rd.ReadRows(buf)
		for _, row := range buf[:k] {
			for _, v := range row {
				vals[v.Column()] = append(vals[v.Column()], v.Clone())
			}
		}
		n += int64(k)
		if err != nil {
			break
		}
	}
	if n != wf.df.Count() || pf.NumRows() != n {
		t.Fatalf("%s: %d rows read, footer %d, manifest %d", wf.path, n, pf.NumRows(), wf.df.Count())
	}
	for _, field := range sc.Fields() {
		col := vals[leafOf[field.ID]]
		want := expectStats(field.Type, col)
		got := colStats{values: wf.df.ValueCounts()[field.ID], nulls: wf.df.NullValueCounts()[field.ID],
			lo: wf.df.LowerBoundValues()[field.ID], hi: wf.df.UpperBoundValues()[field.ID]}
		got.nans, got.hasNaNs = wf.df.NaNValueCounts()[field.ID]
		if want.hasNaNs != got.hasNaNs { // only float and double columns have them
			t.Errorf("%s: column %s: NaN count recorded %v, want %v", wf.path, field.Name, got.hasNaNs, want.hasNaNs)
		}
		if fmt.Sprintf("%d %d %d %x %x", got.values, got.nulls, got.nans, got.lo, got.hi) !=
			fmt.Sprintf("%d %d %d %x %x", want.values, want.nulls, want.nans, want.lo, want.hi) {
			t.Errorf("%s: column %s: manifest values=%d nulls=%d nans=%d lo=%x hi=%x; the file's values give values=%d nulls=%d nans=%d lo=%x hi=%x",
				wf.path, field.Name, got.values, got.nulls, got.nans, got.lo, got.hi, want.values, want.nulls, want.nans, want.lo, want.hi)
		}
		if wf.df.ColumnSizes()[field.ID] <= 0 {
			t.Errorf("%s: column %s: no column size", wf.path, field.Name)
		}
	}
	// every row is in the file's partition
	part := wf.df.Partition()
	for _, pf := range spec.Fields() {
		src, _ := sc.FindFieldByID(pf.SourceID())
		for _, v := range vals[leafOf[src.ID]] {
			if got := partitionOf(t, pf.Transform, src.Type, v); fmt.Sprintf("%T %v", got, got) != fmt.Sprintf("%T %v", part[pf.FieldID], part[pf.FieldID]) {
				t.Fatalf("%s: a row's %s is %T %v, the file's partition %T %v", wf.path, pf.Name, got, got, part[pf.FieldID], part[pf.FieldID])
			}
		}
	}
}

// checkParquetType checks a column's Parquet type against the Iceberg
// spec's mapping.
func checkParquetType(t *testing.T, path string, col *parquet.Column, typ iceberg.Type) {
	t.Helper()
	var lv format.LogicalTypeValue
	if lt := col.Type().LogicalType(); lt != nil {
		lv = lt.Value
	}
	kind := col.Type().Kind()
	var ok bool
	switch typ.(type) {
	case iceberg.BooleanType:
		ok = kind == parquet.Boolean && lv == nil
	case iceberg.Int32Type:
		ok = kind == parquet.Int32
	case iceberg.Int64Type:
		ok = kind == parquet.Int64
	case iceberg.Float32Type:
		ok = kind == parquet.Float && lv == nil
	case iceberg.Float64Type:
		ok = kind == parquet.Double && lv == nil
	case iceberg.StringType:
		_, utf := lv.(*format.StringType)
		ok = kind == parquet.ByteArray && utf
	case iceberg.BinaryType:
		ok = kind == parquet.ByteArray && lv == nil
	case iceberg.DateType:
		_, date := lv.(*format.DateType)
		ok = kind == parquet.Int32 && date
	case iceberg.TimestampType, iceberg.TimestampTzType:
		_, tz := typ.(iceberg.TimestampTzType)
		ts, isTS := lv.(*format.TimestampType)
		if isTS {
			_, micros := ts.Unit.Value.(*format.MicroSeconds)
			ok = kind == parquet.Int64 && micros && ts.IsAdjustedToUTC == tz
		}
	}
	if !ok {
		t.Errorf("%s: column %s of Iceberg type %s is Parquet %s %v", path, col.Name(), typ, kind, lv)
	}
}

type colStats struct {
	values, nulls, nans int64
	hasNaNs             bool
	lo, hi              []byte
}

// expectStats computes a column's statistics from its values, written
// here apart from the writer's: bounds as the Iceberg spec's single-value
// serialization (little-endian numbers, UTF-8 strings), NaN in no bound,
// strings truncated to 16 code points and binary to 16 bytes (the upper
// bound's last one incremented).
func expectStats(typ iceberg.Type, vals []parquet.Value) colStats {
	var s colStats
	s.values = int64(len(vals))
	var nonNull []parquet.Value
	for _, v := range vals {
		switch {
		case v.IsNull():
			s.nulls++
		case (v.Kind() == parquet.Float && math.IsNaN(float64(v.Float()))) || (v.Kind() == parquet.Double && math.IsNaN(v.Double())):
			s.nans++
		default:
			nonNull = append(nonNull, v)
		}
	}
	switch typ.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		s.hasNaNs = true
	}
	if len(nonNull) == 0 {
		return s
	}
	le := func(n int, x uint64) []byte {
		b := make([]byte, n)
		for i := range n {
			b[i] = byte(x >> (8 * i))
		}
		return b
	}
	switch typ.(type) {
	case iceberg.BooleanType:
		lo, hi := true, false
		for _, v := range nonNull {
			lo, hi = lo && v.Boolean(), hi || v.Boolean()
		}
		b := func(x bool) []byte {
			if x {
				return []byte{1}
			}
			return []byte{0}
		}
		s.lo, s.hi = b(lo), b(hi)
	case iceberg.Int32Type, iceberg.DateType:
		lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
		for _, v := range nonNull {
			lo, hi = min(lo, v.Int32()), max(hi, v.Int32())
		}
		s.lo, s.hi = le(4, uint64(uint32(lo))), le(4, uint64(uint32(hi)))
	case iceberg.Int64Type, iceberg.TimestampType, iceberg.TimestampTzType:
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		for _, v := range nonNull {
			lo, hi = min(lo, v.Int64()), max(hi, v.Int64())
		}
		s.lo, s.hi = le(8, uint64(lo)), le(8, uint64(hi))
	case iceberg.Float32Type, iceberg.Float64Type:
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, v := range nonNull {
			f := v.Double()
			if v.Kind() == parquet.Float {
				f = float64(v.Float())
			}
			if f < lo || f == lo && math.Signbit(f) {
				lo = f
			}
			if f > hi || f == hi && !math.Signbit(f) {
				hi = f
			}
		}
		if _, ok := typ.(iceberg.Float32Type); ok {
			s.lo, s.hi = le(4, uint64(math.Float32bits(float32(lo)))), le(4, uint64(math.Float32bits(float32(hi))))
		} else {
			s.lo, s.hi = le(8, math.Float64bits(lo)), le(8, math.Float64bits(hi))
		}
	case iceberg.StringType, iceberg.BinaryType:
		lo, hi := nonNull[0].ByteArray(), nonNull[0].ByteArray()
		for _, v := range nonNull {
			if bytes.Compare(v.ByteArray(), lo) < 0 {
				lo = v.ByteArray()
			}
			if bytes.Compare(v.ByteArray(), hi) > 0 {
				hi = v.ByteArray()
			}
		}
		if _, ok := typ.(iceberg.StringType); ok {
			r := []rune(string(lo))
			s.lo = []byte(string(r[:min(len(r), 16)]))
			r = []rune(string(hi))
			if len(r) > 16 {
				r = r[:16]
				r[15]++ // the test's strings have no U+10FFFF nor U+D7FF
			}
			s.hi = []byte(string(r))
		} else {
			s.lo = bytes.Clone(lo[:min(len(lo), 16)])
			s.hi = bytes.Clone(hi)
			if len(hi) > 16 {
				s.hi = bytes.Clone(hi[:16])
				for len(s.hi) > 0 && s.hi[len(s.hi)-1] == 0xff {
					s.hi = s.hi[:len(s.hi)-1]
				}
				if len(s.hi) > 0 {
					s.hi[len(s.hi)-1]++
				} else {
					s.hi = nil
				}
			}
		}
		if !utf8.Valid(s.lo) {
			if _, ok := typ.(iceberg.StringType); ok {
				panic("invalid UTF-8 in a string column")
			}
		}
	}
	return s
}

// partitionOf computes a row's partition value from its Parquet value,
// with the transforms written out here (bucket with iceberg-go's hash).
func partitionOf(t *testing.T, tr iceberg.Transform, src iceberg.Type, v parquet.Value) any {
	t.Helper()
	if v.IsNull() {
		return nil
	}
	switch tr := tr.(type) {
	case iceberg.DayTransform:
		return iceberg.Date(int32(math.Floor(float64(v.Int64()) / 86400e6)))
	case iceberg.TruncateTransform:
		r := []rune(string(v.ByteArray()))
		return string(r[:min(len(r), tr.Width)])
	case iceberg.BucketTransform:
		return tr.Transformer(src)(v.Int64()).Val
	}
	t.Fatalf("transform %s not handled by the test", tr)
	return nil
}

// pyIcebergCheck reads the table with PyIceberg (skipped without
// SLUICE_PYICEBERG): all rows, and the rows of filters on every bounded
// column, against the counts of the input.
func pyIcebergCheck(t *testing.T, dir string, rows []Row) {
	t.Helper()
	py := os.Getenv("SLUICE_PYICEBERG")
	if py == "" {
		t.Log("SLUICE_PYICEBERG is not set: no PyIceberg read back")
		return
	}
	// filters at the median of each column, with the expected counts
	type filter struct {
		Col   string `json:"col"`
		Value any    `json:"value"`
		Want  int    `json:"want"`
	}
	var filters []filter
	add := func(col string, key func(Row) (float64, bool), lit any, at float64) {
		n := 0
		for _, r := range rows {
			if x, ok := key(r); ok && x >= at {
				n++
			}
		}
		filters = append(filters, filter{col, lit, n})
	}
	num := func(col string) func(Row) (float64, bool) {
		return func(r Row) (float64, bool) {
			switch x := r[col].(type) {
			case int64:
				return float64(x), true
			case float64:
				return x, !math.IsNaN(x)
			}
			return 0, false
		}
	}
	add("l", num("l"), 150_000_000, 150_000_000)
	add("i", num("i"), 1000, 1000)
	add("f", num("f"), 10.5, 10.5)
	add("d", num("d"), 1000.0, 1000)
	sCount := 0
	for _, r := range rows {
		if s, ok := r["s"].(string); ok && s >= "abce" {
			sCount++
		}
	}
	filters = append(filters, filter{"s", "abce", sCount})
	at := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	tzCount, dtCount := 0, 0
	for _, r := range rows {
		if s, ok := r["tz"].(string); ok {
			if tm, _ := time.Parse(time.RFC3339Nano, s); !tm.Before(at) {
				tzCount++
			}
		}
		if r["dt"].(string) >= "2026-12-01" {
			dtCount++
		}
	}
	filters = append(filters, filter{"tz", at.Format("2006-01-02T15:04:05-07:00"), tzCount}, filter{"dt", "2026-12-01", dtCount})
	spec, err := json.Marshal(map[string]any{"catalog": filepath.Join(dir, "catalog.db"), "warehouse": "file://" + filepath.Join(dir, "warehouse"),
		"table": "db.all", "rows": len(rows), "filters": filters})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/pyiceberg_filters.py", string(spec))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("PyIceberg: %v\n%s", err, out)
	}
	t.Logf("PyIceberg: %s", bytes.TrimSpace(out))
}
