// Command goapi is the Go API contender of the Kafka → Kafka benchmark: a
// program written as a user of the library would write it, with typed
// []byte records (the values, passed through), a Kafka source bounded at
// the latest offsets at start and an exactly-once Kafka sink, checkpoints
// every -checkpoint-interval into -checkpoint-dir.
//
//	goapi -brokers 127.0.0.1:9092 -in bench-in -out bench-out -p 2 -checkpoint-dir /tmp/ck
//
// The sink compresses batches with lz4 and does not linger, as the CLI's
// Kafka sink does by default. Keys and headers are not copied ([]byte
// records are values only); the record timestamps are (the sink writes
// each value with its source timestamp). -cpuprofile FILE and -memprofile
// FILE write pprof profiles of the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func main() {
	brokers := flag.String("brokers", "", "bootstrap brokers, comma-separated host:port (required)")
	in := flag.String("in", "", "input topic (required)")
	out := flag.String("out", "", "output topic (required)")
	p := flag.Int("p", 1, "parallelism")
	ckdir := flag.String("checkpoint-dir", "", "checkpoint directory (default: checkpoints in memory)")
	interval := flag.Duration("checkpoint-interval", time.Second, "checkpoint (and transaction) interval")
	prefix := flag.String("txn-prefix", "", "transactional id prefix (default: goapi-<pid>-<time>)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile at the end to this file")
	flag.Parse()
	if *brokers == "" || *in == "" || *out == "" || *p < 1 {
		fmt.Fprintln(os.Stderr, "goapi: -brokers, -in and -out are required, -p at least 1")
		os.Exit(2)
	}
	if *prefix == "" {
		*prefix = fmt.Sprintf("goapi-%d-%d", os.Getpid(), time.Now().UnixMilli())
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "goapi:", err)
			os.Exit(1)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, strings.Split(*brokers, ","), *in, *out, *p, *ckdir, *interval, *prefix)
	stop()
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if *memprofile != "" && err == nil {
		err = writeHeap(*memprofile)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "goapi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, brokers []string, in, out string, p int, ckdir string, interval time.Duration, prefix string) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	src, err := kafka.NewSource(brokers, kafka.BytesDeserializer(), kafka.Topics(in),
		kafka.Bounded(kafka.Latest()), kafka.SourceLogger(log))
	if err != nil {
		return err
	}
	sk, err := kafka.NewSink(brokers, kafka.BytesSerializer(), kafka.DefaultTopic(out),
		kafka.DeliveryGuarantee(kafka.ExactlyOnce), kafka.TransactionalIDPrefix(prefix),
		kafka.ProducerCompression(kafka.LZ4Compression), kafka.SinkLogger(log))
	if err != nil {
		return err
	}
	opts := []stream.Option{stream.Parallelism(p), stream.CheckpointEvery(interval), stream.Logger(log)}
	if ckdir != "" {
		opts = append(opts, stream.CheckpointDir(ckdir))
	}
	env := stream.New(opts...)
	values := stream.FromSource(env, src, watermark.None[[]byte](), "in")
	stream.SinkTo(values, sk, "out")
	if _, err := env.Execute(ctx, "bench-goapi"); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	return nil
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	return errors.Join(pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
}
