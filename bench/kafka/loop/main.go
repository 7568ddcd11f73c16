// Command loop is the baseline of the Kafka → Kafka benchmark: the
// hand-written franz-go copy loop that issue 15 measures sluice against.
//
// Each worker is one franz-go client that is at once a direct-assignment
// read_committed consumer of its share of the input partitions (partition
// i goes to worker i mod p) and a transactional producer. The fetched
// *kgo.Records are produced again as they are (no copy, no decode with
// -codec raw), to the same partition of the output topic, in lz4 batches
// without linger; a transaction is committed about every -txn-interval.
// After each commit the worker writes the next offset of each of its
// partitions to -offsets-dir/worker-<i>.offsets (the loop's own record of
// where it is; a benchmark run starts from the beginning and never reads
// it back). The loop ends when every partition reached the end offset it
// had when the loop started (a bounded run, as sluice's
// scan.bounded.mode: latest-offset).
//
//	loop -brokers 127.0.0.1:9092 -in bench-in -out bench-out -p 2 -codec raw
//
// -codec json decodes each value into a map[string]any with encoding/json
// and encodes it again (the cost of a record that is read); the output is
// byte for byte the input when the input is canonical JSON (keys sorted,
// compact, no characters encoding/json escapes, integers below 2^53).
// -codec avro does the same with github.com/hamba/avro/v2 for values in
// the Confluent wire format (magic byte 0, schema id, Avro binary): the
// schema is fetched by id from -schema-registry once per id, and the
// output keeps the input's header.
//
// -cpuprofile FILE and -memprofile FILE write pprof profiles of the run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type config struct {
	brokers     []string
	in, out     string
	workers     int
	codec       string
	txnInterval time.Duration
	txnPrefix   string
	offsetsDir  string
	linger      time.Duration
	compression string
	registry    string
}

func main() {
	var c config
	brokers := flag.String("brokers", os.Getenv("SLUICE_KAFKA_BROKERS"), "bootstrap brokers, comma-separated (default $SLUICE_KAFKA_BROKERS)")
	flag.StringVar(&c.in, "in", "", "input topic (required)")
	flag.StringVar(&c.out, "out", "", "output topic (required; must have at least the input's partitions)")
	flag.IntVar(&c.workers, "p", 1, "workers: clients, each with its share of the input partitions")
	flag.StringVar(&c.codec, "codec", "raw", "raw: values passed through; json: each value decoded into map[string]any and encoded again with encoding/json; avro: the same with hamba/avro (Confluent wire format, needs -schema-registry)")
	flag.StringVar(&c.registry, "schema-registry", os.Getenv("SLUICE_SCHEMA_REGISTRY"), "schema registry URL for -codec avro (default $SLUICE_SCHEMA_REGISTRY)")
	flag.DurationVar(&c.txnInterval, "txn-interval", time.Second, "how often each worker commits its transaction")
	flag.StringVar(&c.txnPrefix, "txn-prefix", "", "transactional id prefix (default bench-loop-<pid>-<unix ms>); worker i uses <prefix>-<i>")
	flag.StringVar(&c.offsetsDir, "offsets-dir", "", "directory for the committed offsets of each worker (default: a new temporary directory, removed at the end)")
	flag.DurationVar(&c.linger, "linger", 0, "producer linger")
	flag.StringVar(&c.compression, "compression", "lz4", "producer batch compression: none, gzip, snappy, lz4, zstd")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	memprofile := flag.String("memprofile", "", "write an allocation profile at the end to this file")
	flag.Parse()
	c.brokers = splitList(*brokers)
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "loop:", err)
		os.Exit(2)
	}
	if c.txnPrefix == "" {
		c.txnPrefix = fmt.Sprintf("bench-loop-%d-%d", os.Getpid(), time.Now().UnixMilli())
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loop:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "loop:", err)
			os.Exit(1)
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	n, err := run(ctx, c)
	if *memprofile != "" {
		if werr := writeHeap(*memprofile); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loop:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "loop: copied %d records in %v (%.0f records/s)\n", n, d.Round(time.Millisecond), float64(n)/d.Seconds())
}

func writeHeap(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func splitList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

func (c *config) check() error {
	switch {
	case len(c.brokers) == 0:
		return errors.New("-brokers (or SLUICE_KAFKA_BROKERS) is required")
	case c.in == "" || c.out == "":
		return errors.New("-in and -out are required")
	case c.workers < 1:
		return fmt.Errorf("-p must be at least 1, got %d", c.workers)
	case c.codec != "raw" && c.codec != "json" && c.codec != "avro":
		return fmt.Errorf("-codec: want raw, json or avro, got %q", c.codec)
	case c.codec == "avro" && c.registry == "":
		return errors.New("-codec avro needs -schema-registry (or SLUICE_SCHEMA_REGISTRY)")
	case c.txnInterval <= 0:
		return fmt.Errorf("-txn-interval must be positive, got %v", c.txnInterval)
	}
	if _, err := compression(c.compression); err != nil {
		return err
	}
	return nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("-compression: want none, gzip, snappy, lz4 or zstd, got %q", name)
}

// run copies the input to the output with c.workers workers and returns
// the number of records copied.
func run(ctx context.Context, c config) (int64, error) {
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.brokers...))
	if err != nil {
		return 0, err
	}
	ends, err := kadm.NewClient(admin).ListEndOffsets(ctx, c.in)
	admin.Close()
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", c.in, err)
	}
	if err := ends.Error(); err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", c.in, err)
	}
	shares := make([]map[int32]int64, c.workers)
	for i := range shares {
		shares[i] = map[int32]int64{}
	}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			shares[int(o.Partition)%c.workers][o.Partition] = o.Offset
		}
	})
	if c.offsetsDir == "" {
		dir, err := os.MkdirTemp("", "bench-loop-offsets-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		c.offsetsDir = dir
	}
	codec, _ := compression(c.compression)
	var (
		wg    sync.WaitGroup
		total atomic.Int64
		errs  = make([]error, c.workers)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range c.workers {
		if len(shares[i]) == 0 {
			continue
		}
		wg.Go(func() {
			w := &worker{c: c, id: i, ends: shares[i], codec: codec}
			if c.codec == "avro" {
				ac, err := newAvroCodec(c.registry)
				if err != nil {
					errs[i] = err
					cancel()
					return
				}
				w.avro = ac
			}
			n, err := w.run(ctx)
			total.Add(n)
			if err != nil {
				errs[i] = fmt.Errorf("worker %d: %w", i, err)
				cancel()
			}
		})
	}
	wg.Wait()
	return total.Load(), errors.Join(errs...)
}

type worker struct {
	c     config
	id    int
	ends  map[int32]int64 // partition → end offset (exclusive)
	codec kgo.CompressionCodec

	produceErr atomic.Pointer[error]
	avro       *avroCodec // -codec avro
}

func (w *worker) run(ctx context.Context) (int64, error) {
	assign := map[int32]kgo.Offset{}
	for p := range w.ends {
		assign[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(w.c.brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.c.in: assign}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.TransactionalID(fmt.Sprintf("%s-%d", w.c.txnPrefix, w.id)),
		kgo.TransactionTimeout(time.Minute),
		kgo.DefaultProduceTopic(w.c.out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(w.codec),
		kgo.ProducerLinger(w.c.linger),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()

	next := map[int32]int64{} // partition → next offset to read
	done := 0
	for p, end := range w.ends {
		next[p] = 0
		if end <= 0 {
			done++
		}
	}
	var copied int64
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			w.produceErr.CompareAndSwap(nil, &err)
		}
	}
	if err := cl.BeginTransaction(); err != nil {
		return 0, fmt.Errorf("begin transaction: %w", err)
	}
	last := time.Now()
	for done < len(w.ends) {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return copied, err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return copied, ferr
		}
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			end := w.ends[fp.Partition]
			for _, r := range fp.Records {
				if r.Offset >= end {
					continue
				}
				if w.c.codec != "raw" {
					var v []byte
					var err error
					if w.avro != nil {
						v, err = w.avro.recode(ctx, r.Value)
					} else {
						v, err = recode(r.Value)
					}
					if err != nil {
						err = fmt.Errorf("%s[%d]@%d: %w", r.Topic, r.Partition, r.Offset, err)
						w.produceErr.CompareAndSwap(nil, &err)
						return
					}
					r.Value = v
				}
				before := next[fp.Partition]
				next[fp.Partition] = r.Offset + 1
				if before < end && r.Offset+1 >= end {
					done++
				}
				r.Topic = w.c.out // same partition: ManualPartitioner
				cl.Produce(ctx, r, promise)
				copied++
			}
		})
		if e := w.produceErr.Load(); e != nil {
			return copied, *e
		}
		if done == len(w.ends) || time.Since(last) >= w.c.txnInterval {
			if err := w.commit(ctx, cl, next); err != nil {
				return copied, err
			}
			last = time.Now()
			if done < len(w.ends) {
				if err := cl.BeginTransaction(); err != nil {
					return copied, fmt.Errorf("begin transaction: %w", err)
				}
			}
		}
	}
	return copied, nil
}

// commit flushes, commits the transaction and writes the offsets it covers.
func (w *worker) commit(ctx context.Context, cl *kgo.Client, next map[int32]int64) error {
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if e := w.produceErr.Load(); e != nil {
		_ = cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce: %w", *e)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return w.saveOffsets(next)
}

func (w *worker) saveOffsets(next map[int32]int64) error {
	parts := make([]int32, 0, len(next))
	for p := range next {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	var b strings.Builder
	for _, p := range parts {
		fmt.Fprintf(&b, "%s %d %d\n", w.c.in, p, next[p])
	}
	path := filepath.Join(w.c.offsetsDir, fmt.Sprintf("worker-%d.offsets", w.id))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// recode decodes a JSON object into a map[string]any and encodes it again.
func recode(v []byte) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
