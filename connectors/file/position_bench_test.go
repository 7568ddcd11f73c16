package file

import (
	"context"
	"testing"

	"github.com/sluice-io/sluice/metrics"
)

// readSplitAll reads sp to its end with a splitReader over cfg and returns
// the number of records.
func readSplitAll[T any](b *testing.B, f Format[T], cfg *sourceConfig, sp Split) int {
	r := newSplitReader(f, cfg, new(metrics.Counter))
	defer r.Close()
	if err := r.AddSplits([]Split{sp}); err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		bt, err := r.Fetch(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		for _, g := range bt.Records {
			for _, c := range g.Records {
				n += len(c.vs)
			}
		}
		if bt.Recycle != nil {
			bt.Recycle()
		}
		if len(bt.Finished) > 0 {
			return n
		}
	}
}

// BenchmarkReadPositions measures what PositionAs costs the reader: text
// lines (read in batches) and JSON lines (read record by record), each
// without and with a PositionAs that keeps the position (as the CLI's
// does, which allocates it). Compare ns/op of the pairs; the reads are of
// one 16 MiB file of about 100-byte lines, with the file source's batch
// size.
func BenchmarkReadPositions(b *testing.B) {
	paths, total, lines := writeBenchFiles(b, b.TempDir(), 1, 16<<20)
	sp := Split{Path: paths[0], End: -1}
	var sink *Position
	keep := func(p Position) { sink = &p }
	run := func(name string, read func(cfg *sourceConfig) int, opts ...SourceOption) {
		b.Run(name, func(b *testing.B) {
			cfg := defaultSourceConfig()
			for _, o := range opts {
				o.applySource(&cfg)
			}
			b.SetBytes(total)
			b.ReportAllocs()
			for b.Loop() {
				if n := read(&cfg); n != lines {
					b.Fatalf("read %d records, want %d", n, lines)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/record")
		})
	}
	text := func(cfg *sourceConfig) int { return readSplitAll(b, TextLines(), cfg, sp) }
	js := func(cfg *sourceConfig) int { return readSplitAll(b, JSONLines[map[string]any](), cfg, sp) }
	run("text", text)
	run("text-positions", text, PositionAs(func(v string, p Position) string { keep(p); return v }))
	run("json", js)
	run("json-positions", js, PositionAs(func(v map[string]any, p Position) map[string]any { keep(p); return v }))
	_ = sink
}
