package iceberg

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/sluice-io/sluice/sink"
)

// BenchmarkCommitPerCheckpoint measures the global committer's work for
// one checkpoint: load the table, walk its ancestry, add the files of 3
// writers (one data file each, 1000 rows) in one snapshot and commit it
// to a SQLite SQL catalog with a local warehouse. history is the number of
// snapshots the table has before the measured ones; with
// DuplicateFileCheck each commit also reads every manifest of the table.
// The postgres cases use a SQL catalog on the PostgreSQL at
// $SLUICE_POSTGRES_URL (scripts/postgres.sh; a namespace of their own; the
// warehouse stays local), the rest cases the REST catalog at
// $SLUICE_ICEBERG_REST (scripts/iceberg-rest.sh); each is skipped without
// its variable. compact=10 adds a compaction of the last 10 checkpoints'
// files after every 10th commit.
func BenchmarkCommitPerCheckpoint(b *testing.B) {
	for _, bc := range []struct {
		history  int
		dupCheck bool
		rest     bool
		compact  int
		postgres bool
	}{{0, false, false, 0, false}, {100, false, false, 0, false}, {0, true, false, 0, false}, {100, true, false, 0, false},
		{0, false, true, 0, false}, {100, false, true, 0, false}, {0, false, false, 10, false},
		{0, false, false, 0, true}, {100, false, false, 0, true}} {
		name := fmt.Sprintf("history=%d/duplicate-check=%v", bc.history, bc.dupCheck)
		switch {
		case bc.rest:
			name = fmt.Sprintf("rest/history=%d", bc.history)
		case bc.postgres:
			name = fmt.Sprintf("postgres/history=%d", bc.history)
		}
		if bc.compact > 0 {
			name += fmt.Sprintf("/compact=%d", bc.compact)
		}
		b.Run(name, func(b *testing.B) {
			history := bc.history
			cat, ident := testCatalog(b.TempDir()), []string{"bench", "t"}
			if bc.rest {
				uri := os.Getenv("SLUICE_ICEBERG_REST")
				if uri == "" {
					b.Skip("SLUICE_ICEBERG_REST is not set")
				}
				cat, ident = RESTCatalog("rest", uri, "", nil), []string{fmt.Sprintf("bench%d", time.Now().UnixNano()), "t"}
			}
			if bc.postgres {
				uri := os.Getenv("SLUICE_POSTGRES_URL")
				if uri == "" {
					b.Skip("SLUICE_POSTGRES_URL is not set")
				}
				cat = SQLCatalog("default", uri, filepath.Join(b.TempDir(), "warehouse"), nil)
				ident = []string{fmt.Sprintf("bench%d", time.Now().UnixNano()), "t"}
			}
			s, err := New(cat, ident, testRow, CreateTable(testColumns, nil, nil), DuplicateFileCheck(bc.dupCheck), Compaction(bc.compact))
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			prepare := func(cp int64) []committable {
				var out []committable
				for range 3 {
					w, err := s.CreateWriter(ctx, testInit{})
					if err != nil {
						b.Fatal(err)
					}
					for k := range int64(1000) {
						if err := w.Write(ctx, failureRecord(cp*1000+k), sink.Meta{}); err != nil {
							b.Fatal(err)
						}
					}
					cs, err := w.PrepareCommit(ctx, cp)
					if err != nil {
						b.Fatal(err)
					}
					_ = w.Close()
					out = append(out, cs...)
				}
				return out
			}
			gc, err := s.CreateGlobalCommitter(ctx, testInit{})
			if err != nil {
				b.Fatal(err)
			}
			defer gc.Close()
			cp := int64(0)
			for range history {
				cp++
				if err := gc.CommitGlobal(ctx, cp, prepare(cp)); err != nil {
					b.Fatal(err)
				}
			}
			batches := make([][]committable, b.N)
			for i := range batches {
				batches[i] = prepare(cp + int64(i) + 1)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := gc.CommitGlobal(ctx, cp+int64(i)+1, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchClick is the hand-written baseline's row (the columns of
// BenchmarkDataFileWrite's table).
type benchClick struct {
	ID    int64     `parquet:"id"`
	User  string    `parquet:"user"`
	Score float64   `parquet:"score"`
	OK    bool      `parquet:"ok"`
	TS    time.Time `parquet:"ts,timestamp(microsecond)"`
}

// BenchmarkDataFileWrite measures a writer's data file path alone: 200k
// map records (id long, user string, score double, ok boolean, ts
// timestamptz; the s3 benchmark's records) through Write and one
// PrepareCommit, which writes one zstd Parquet file (the table default)
// into a local warehouse; no snapshot. parquet-go is the sink's writer,
// arrow the iceberg-go Arrow writer it replaced (still used for tables
// whose settings the parquet-go writer does not support), hand-written a
// parquet-go GenericWriter[struct] of the same records converted by a
// type switch per field, zstd, to a local file. It reports rows/s and
// this process's CPU seconds (user+sys) per million rows; run with -count
// for interleaved rounds.
func BenchmarkDataFileWrite(b *testing.B) {
	const n = 200_000
	recs := make([]Row, n)
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range recs {
		recs[i] = Row{"id": int64(i), "user": fmt.Sprintf("user-%d", i%1000), "score": float64(i%997) / 7,
			"ok": i%3 == 0, "ts": base.Add(time.Duration(i) * time.Millisecond)}
	}
	cols, err := ParseColumns("id long not null", "user string not null", "score double not null", "ok boolean not null", "ts timestamptz not null")
	if err != nil {
		b.Fatal(err)
	}
	measure := func(b *testing.B, run func(b *testing.B)) {
		var ru0, ru1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		b.ResetTimer()
		for range b.N {
			run(b)
		}
		b.StopTimer()
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
		rows := float64(n) * float64(b.N)
		b.ReportMetric(rows/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(cpu.Seconds()/rows*1e6, "cpu-s/1M-rows")
	}
	for _, arrow := range []bool{false, true} {
		name := "parquet-go"
		if arrow {
			name = "arrow"
		}
		b.Run(name, func(b *testing.B) {
			s, err := New(testCatalog(b.TempDir()), []string{"bench", "clicks"}, func(r Row) (Row, error) { return r, nil },
				CreateTable(cols, nil, nil), TargetFileSize(1<<40))
			if err != nil {
				b.Fatal(err)
			}
			s.cfg.arrowWriter = arrow
			ctx := b.Context()
			cp := int64(0)
			measure(b, func(b *testing.B) {
				w, err := s.CreateWriter(ctx, testInit{})
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				for _, r := range recs {
					if err := w.Write(ctx, r, sink.Meta{}); err != nil {
						b.Fatal(err)
					}
				}
				cp++
				cs, err := w.PrepareCommit(ctx, cp)
				if err != nil || len(cs) != 1 || len(cs[0].Files) != 1 || cs[0].Files[0].Records != n {
					b.Fatalf("prepare commit: %v, %+v", err, cs)
				}
			})
		})
	}
	b.Run("hand-written", func(b *testing.B) {
		dir := b.TempDir()
		measure(b, func(b *testing.B) {
			f, err := os.Create(filepath.Join(dir, "clicks.parquet"))
			if err != nil {
				b.Fatal(err)
			}
			pw := parquet.NewGenericWriter[benchClick](f, parquet.Compression(&parquet.Zstd))
			batch := make([]benchClick, 0, 1024)
			for _, r := range recs {
				var c benchClick
				for k, v := range r {
					switch k {
					case "id":
						c.ID, _ = v.(int64)
					case "user":
						c.User, _ = v.(string)
					case "score":
						c.Score, _ = v.(float64)
					case "ok":
						c.OK, _ = v.(bool)
					case "ts":
						c.TS, _ = v.(time.Time)
					}
				}
				if batch = append(batch, c); len(batch) == cap(batch) {
					if _, err := pw.Write(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
			if _, err := pw.Write(batch); err != nil {
				b.Fatal(err)
			}
			if err := pw.Close(); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		})
	})
}
