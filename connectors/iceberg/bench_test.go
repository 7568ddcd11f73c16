package iceberg

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

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
