package postgres

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The benchmarks write b.N rows (k bigint, v text) into a fresh table on
// the real server and report rows/s and the client's CPU seconds per
// million rows (the server's CPU is not counted). Run them with a fixed
// count, for example
//
//	go test -run '^$' -bench . -benchtime 200000x -count 5 ./connectors/postgres/
//
// baseline-copy and baseline-upsert are hand-written pgx loops (COPY of
// 1000-row batches; pipelined batches of 1000 upserts, autocommitted),
// baseline-copy-txn the COPY loop in transactions of 50k rows;
// the sink-* cases run a job datagen → sink at parallelism 1 with a
// checkpoint every 500 ms and the sink's default BatchSize (1000);
// *-synccommit are the at-least-once cases with every batch committed
// synchronously, the comparison for their asynchronous commits with a WAL
// flush at each checkpoint.

func cpuNow() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchRow(i int64) []any { return []any{i, "value-" + strconv.FormatInt(i, 10)} }

func measure(b *testing.B, run func(n int64)) {
	b.Helper()
	n := int64(b.N)
	c0, t0 := cpuNow(), time.Now()
	b.ResetTimer()
	run(n)
	b.StopTimer()
	el, cpu := time.Since(t0), cpuNow()-c0
	b.ReportMetric(float64(n)/el.Seconds(), "rows/s")
	b.ReportMetric(cpu.Seconds()/float64(n)*1e6, "cpu-s/Mrows")
}

func benchTable(b *testing.B, upsert bool) string {
	b.Helper()
	if upsert {
		return newTable(b, "bench_up", "k bigint PRIMARY KEY, v text NOT NULL")
	}
	return newTable(b, "bench", "k bigint NOT NULL, v text NOT NULL")
}

func benchConn(b *testing.B) *pgx.Conn {
	b.Helper()
	conn, err := pgx.Connect(b.Context(), needServer(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func BenchmarkSink(b *testing.B) {
	url := needServer(b)
	b.Run("baseline-copy", func(b *testing.B) {
		table := benchTable(b, false)
		conn := benchConn(b)
		measure(b, func(n int64) {
			rows := make([][]any, 0, 1000)
			for i := int64(0); i < n; i++ {
				rows = append(rows, benchRow(i))
				if len(rows) == cap(rows) || i == n-1 {
					if _, err := conn.CopyFrom(b.Context(), pgx.Identifier{table}, []string{"k", "v"}, pgx.CopyFromRows(rows)); err != nil {
						b.Fatal(err)
					}
					rows = rows[:0]
				}
			}
		})
	})
	b.Run("baseline-copy-txn", func(b *testing.B) {
		// COPY batches in transactions of 50k rows, about what a 500 ms
		// checkpoint interval holds: the fair baseline of exactly-once
		// Append, which commits once per checkpoint.
		table := benchTable(b, false)
		conn := benchConn(b)
		measure(b, func(n int64) {
			rows := make([][]any, 0, 1000)
			var tx pgx.Tx
			for i := int64(0); i < n; i++ {
				if tx == nil {
					var err error
					if tx, err = conn.Begin(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
				rows = append(rows, benchRow(i))
				if len(rows) == cap(rows) || i == n-1 {
					if _, err := tx.CopyFrom(b.Context(), pgx.Identifier{table}, []string{"k", "v"}, pgx.CopyFromRows(rows)); err != nil {
						b.Fatal(err)
					}
					rows = rows[:0]
				}
				if (i+1)%50_000 == 0 || i == n-1 {
					if err := tx.Commit(b.Context()); err != nil {
						b.Fatal(err)
					}
					tx = nil
				}
			}
		})
	})
	b.Run("baseline-upsert", func(b *testing.B) {
		table := benchTable(b, true)
		conn := benchConn(b)
		sql := "INSERT INTO " + table + " (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"
		measure(b, func(n int64) {
			batch := &pgx.Batch{}
			for i := int64(0); i < n; i++ {
				batch.Queue(sql, benchRow(i)...)
				if batch.Len() == 1000 || i == n-1 {
					if err := conn.SendBatch(b.Context(), batch).Close(); err != nil {
						b.Fatal(err)
					}
					batch = &pgx.Batch{}
				}
			}
		})
	})
	for _, c := range []struct {
		name   string
		upsert bool
		sync   bool // at-least-once: every batch committed synchronously
		opts   []SinkOption
	}{
		{"sink-exactly-once-append", false, false, nil},
		{"sink-exactly-once-upsert", true, false, []SinkOption{WriteMode(Upsert)}},
		{"sink-at-least-once-append", false, false, []SinkOption{DeliveryGuarantee(AtLeastOnce)}},
		{"sink-at-least-once-upsert", true, false, []SinkOption{DeliveryGuarantee(AtLeastOnce), WriteMode(Upsert)}},
		{"sink-at-least-once-append-synccommit", false, true, []SinkOption{DeliveryGuarantee(AtLeastOnce)}},
		{"sink-at-least-once-upsert-synccommit", true, true, []SinkOption{DeliveryGuarantee(AtLeastOnce), WriteMode(Upsert)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			table := benchTable(b, c.upsert)
			s, err := newRowSink(url, table, func(i int64) ([]any, error) { return benchRow(i), nil }, append([]SinkOption{Columns("k", "v")}, c.opts...))
			if err != nil {
				b.Fatal(err)
			}
			s.syncBatches = c.sync
			sk := s.wrap()
			measure(b, func(n int64) {
				env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(500*time.Millisecond),
					stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()))
				s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(n)), watermark.None[int64](), "gen")
				stream.SinkTo(s, sk, "pg")
				if _, err := env.Execute(b.Context(), "bench"); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
