package iceberg

import (
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/sink"
)

// BenchmarkCommitPerCheckpoint measures the global committer's work for
// one checkpoint: load the table, walk its ancestry, add the files of 3
// writers (one data file each, 1000 rows) in one snapshot and commit it
// to a SQLite SQL catalog with a local warehouse. history is the number of
// snapshots the table has before the measured ones; with
// DuplicateFileCheck each commit also reads every manifest of the table.
func BenchmarkCommitPerCheckpoint(b *testing.B) {
	for _, bc := range []struct {
		history  int
		dupCheck bool
	}{{0, false}, {100, false}, {0, true}, {100, true}} {
		b.Run(fmt.Sprintf("history=%d/duplicate-check=%v", bc.history, bc.dupCheck), func(b *testing.B) {
			history := bc.history
			dir := b.TempDir()
			ident := []string{"bench", "t"}
			s, err := New(testCatalog(dir), ident, testRow, CreateTable(testColumns, nil, nil), DuplicateFileCheck(bc.dupCheck))
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
