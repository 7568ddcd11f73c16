package postgres

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The source benchmarks read b.N rows (id bigint, v text) on the real
// server and report rows/s and client CPU seconds per million rows, for
// example
//
//	go test -run '^$' -bench 'Source|CDC' -benchtime 200000x -count 3 ./connectors/postgres/
//
// BenchmarkSnapshotSource: baseline is a hand-written pgx keyset loop
// (pages of 8192 rows by id, scanned into an int64 and a string); sluice
// runs a job of the snapshot source (defaults: chunks and pages of 8192,
// parallelism 1) into a counting sink. BenchmarkCDC: b.N inserted rows
// (one transaction) read from a fresh slot; baseline is a hand-written
// pglogrepl loop that decodes the messages and the tuples' text; sluice
// runs the CDC source (SkipSnapshot) into a counting sink.

// countSink counts records.
type countSink[T any] struct{ n *atomic.Int64 }

func (s countSink[T]) CreateWriter(context.Context, sink.InitContext) (sink.Writer[T], error) {
	return countWriter[T](s), nil
}

type countWriter[T any] struct{ n *atomic.Int64 }

func (w countWriter[T]) Write(context.Context, T, sink.Meta) error { w.n.Add(1); return nil }
func (w countWriter[T]) Flush(context.Context, bool) error         { return nil }
func (w countWriter[T]) Close() error                              { return nil }

func benchSourceTable(b *testing.B, n int) string {
	table := newTable(b, "bsrc", "id bigint PRIMARY KEY, v text NOT NULL")
	mustExec(b, fmt.Sprintf("INSERT INTO %s SELECT g, 'value-' || g FROM generate_series(1, %d) g", table, n), "VACUUM ANALYZE "+table)
	return table
}

func BenchmarkSnapshotSource(b *testing.B) {
	url := needServer(b)
	b.Run("baseline", func(b *testing.B) {
		table := benchSourceTable(b, b.N)
		conn := benchConn(b)
		measure(b, func(n int64) {
			var last, got int64
			for {
				rows, err := conn.Query(b.Context(), "SELECT id, v FROM "+table+" WHERE id > $1 ORDER BY id LIMIT 8192", last)
				if err != nil {
					b.Fatal(err)
				}
				var id int64
				var v string
				k := 0
				_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error { last = id; k++; return nil })
				if err != nil {
					b.Fatal(err)
				}
				got += int64(k)
				if k < 8192 {
					break
				}
			}
			if got != n {
				b.Fatalf("read %d rows, want %d", got, n)
			}
		})
	})
	b.Run("sluice", func(b *testing.B) {
		table := benchSourceTable(b, b.N)
		measure(b, func(n int64) {
			src, err := NewSnapshotSource(url, table)
			if err != nil {
				b.Fatal(err)
			}
			var cnt atomic.Int64
			env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(500*time.Millisecond), stream.Logger(stream.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "pg"), sink.Sink[Change](countSink[Change]{&cnt}), "count")
			if _, err := env.Execute(b.Context(), "bench"); err != nil {
				b.Fatal(err)
			}
			if cnt.Load() != n {
				b.Fatalf("read %d rows, want %d", cnt.Load(), n)
			}
		})
	})
}

// cdcBenchSetup makes a table, a publication and a slot, then inserts n
// rows in one transaction.
func cdcBenchSetup(b *testing.B, n int) (table, slot, pub string) {
	table = newTable(b, "bcdc", "id bigint PRIMARY KEY, v text NOT NULL")
	slot, pub = "s_"+table, "p_"+table
	mustExec(b, "CREATE PUBLICATION "+pub+" FOR TABLE "+table,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testURL)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for i := 0; i < 100; i++ {
			if _, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot($1)", slot); err == nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, _ = conn.Exec(ctx, "DROP PUBLICATION "+pub)
	})
	mustExec(b, fmt.Sprintf("INSERT INTO %s SELECT g, 'value-' || g FROM generate_series(1, %d) g", table, n))
	return table, slot, pub
}

func BenchmarkCDC(b *testing.B) {
	url := needServer(b)
	b.Run("baseline", func(b *testing.B) {
		_, slot, pub := cdcBenchSetup(b, b.N)
		pc, err := pgconn.ParseConfig(url)
		if err != nil {
			b.Fatal(err)
		}
		pc.RuntimeParams["replication"] = "database"
		measure(b, func(n int64) {
			ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
			defer cancel()
			repl, err := pgconn.ConnectConfig(ctx, pc)
			if err != nil {
				b.Fatal(err)
			}
			defer repl.Close(context.Background())
			if err := pglogrepl.StartReplication(ctx, repl, slot, 0, pglogrepl.StartReplicationOptions{
				PluginArgs: []string{"proto_version '1'", "publication_names '" + pub + "'"}}); err != nil {
				b.Fatal(err)
			}
			var got int64
			for got < n {
				msg, err := repl.ReceiveMessage(ctx)
				if err != nil {
					b.Fatal(err)
				}
				cd, ok := msg.(*pgproto3.CopyData)
				if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
					continue
				}
				xld, err := pglogrepl.ParseXLogData(cd.Data[1:])
				if err != nil {
					b.Fatal(err)
				}
				m, err := pglogrepl.Parse(xld.WALData)
				if err != nil {
					b.Fatal(err)
				}
				if ins, ok := m.(*pglogrepl.InsertMessage); ok {
					row := make(map[string]string, len(ins.Tuple.Columns))
					for i, c := range ins.Tuple.Columns {
						row[fmt.Sprint(i)] = string(c.Data)
					}
					got++
				}
			}
		})
	})
	b.Run("sluice", func(b *testing.B) {
		table, slot, pub := cdcBenchSetup(b, b.N)
		measure(b, func(n int64) {
			src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), SkipSnapshot())
			if err != nil {
				b.Fatal(err)
			}
			var cnt atomic.Int64
			env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(500*time.Millisecond), stream.Logger(stream.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "pg"), sink.Sink[Change](countSink[Change]{&cnt}), "count")
			ctx, cancel := context.WithTimeout(b.Context(), 5*time.Minute)
			defer cancel()
			h, err := env.Start(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			for cnt.Load() < n && ctx.Err() == nil {
				time.Sleep(time.Millisecond)
			}
			h.Cancel()
			_, _ = h.Wait()
			if cnt.Load() < n {
				b.Fatalf("read %d changes, want %d", cnt.Load(), n)
			}
		})
	})
}
