//go:build unix

package exchange_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds records/s and CPU-seconds (both ends: the whole process)
// per million records.
func report(b *testing.B, n int, wall, cpu time.Duration) {
	b.ReportMetric(float64(n)/wall.Seconds(), "rec/s")
	b.ReportMetric(cpu.Seconds()/float64(n)*1e6, "CPU-s/M")
}

// BenchmarkExchange moves 100-byte records through a gRPC channel over
// loopback (plaintext; sender, receiver and server in one process) and,
// for comparison, through an in-process channel of batches like the
// engine's, at several batch sizes.
func BenchmarkExchange(b *testing.B) {
	rec := make([]byte, 100)
	for _, size := range []int{64, 512, 4096} {
		b.Run(fmt.Sprintf("grpc/batch=%d", size), func(b *testing.B) {
			srv, addr := startServer(b)
			c := dial(b, addr)
			r, s := pair[[]byte](b, srv, c, exchange.BytesCodec{}, nil, nil)
			defer r.Close()
			batch := make([][]byte, size)
			for i := range batch {
				batch[i] = rec
			}
			ctx := b.Context()
			b.ReportAllocs()
			b.SetBytes(int64(len(rec)))
			cpu0, t0 := cpuTime(), time.Now()
			b.ResetTimer()
			done := make(chan error, 1)
			go func() {
				for left := b.N; left > 0; left -= size {
					if err := s.SendBatch(ctx, batch[:min(size, left)]); err != nil {
						done <- err
						return
					}
				}
				done <- s.Close(ctx)
			}()
			n := 0
			for {
				m, err := r.Next(ctx)
				if errors.Is(err, exchange.ErrEndOfStream) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n += len(m.Records)
			}
			b.StopTimer()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if n != b.N {
				b.Fatalf("got %d records, want %d", n, b.N)
			}
			report(b, n, time.Since(t0), cpuTime()-cpu0)
		})
		b.Run(fmt.Sprintf("inprocess/batch=%d", size), func(b *testing.B) {
			ch := make(chan [][]byte, 4)
			b.ReportAllocs()
			b.SetBytes(int64(len(rec)))
			cpu0, t0 := cpuTime(), time.Now()
			b.ResetTimer()
			go func() {
				for left := b.N; left > 0; left -= size {
					batch := make([][]byte, min(size, left))
					for i := range batch {
						batch[i] = rec
					}
					ch <- batch
				}
				close(ch)
			}()
			n := 0
			for batch := range ch {
				n += len(batch)
			}
			b.StopTimer()
			report(b, n, time.Since(t0), cpuTime()-cpu0)
		})
	}
}
