// Command driver runs the Kafka → Kafka exactly-once benchmark: it
// produces the input topic once, then for each round, parallelism and
// contender (interleaved) creates a fresh output topic with
// message.timestamp.type=LogAppendTime, runs the contender to its end,
// measures it, verifies its output with a read_committed reader, and
// prints a table of medians with ranges plus benchstat lines. See
// bench/kafka/README.md; bench/kafka/run.sh builds everything and starts a
// broker.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	brokers     []string
	brokerPID   int
	records     int
	valueSize   int
	partitions  int
	rounds      int
	ps          []int
	contenders  []contender
	sluice      string
	loop        string
	goapi       string
	flinkJar    string
	java        string
	work        string
	results     string
	csv         string
	tsAge       time.Duration
	keep        bool
	warmup      bool
	runTimeout  time.Duration
	readTimeout time.Duration
	profile     string

	format         string // of the input: json or avro
	registry       string // schema registry URL (avro)
	avroSchemaFile string
}

func main() {
	if err := mainErr(); err != nil {
		fmt.Fprintln(os.Stderr, "driver:", err)
		var u usageErr
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

type usageErr struct{ error }

func mainErr() error {
	var o options
	fs := flag.NewFlagSet("driver", flag.ContinueOnError)
	brokers := fs.String("brokers", os.Getenv("SLUICE_KAFKA_BROKERS"), "bootstrap brokers, comma-separated (default $SLUICE_KAFKA_BROKERS)")
	fs.IntVar(&o.brokerPID, "broker-pid", 0, "pid of the broker process for its CPU-seconds (default: the pid file in $SLUICE_KAFKA_RUN; 0 and no run dir: broker CPU not measured)")
	fs.IntVar(&o.records, "records", 2_000_000, "records in the input topic")
	fs.IntVar(&o.valueSize, "value-size", 100, "bytes per value (a canonical JSON object, padded; at least 64)")
	fs.IntVar(&o.partitions, "partitions", 8, "partitions of the input and output topics")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every contender at every parallelism once, interleaved")
	ps := fs.String("p", "1,2", "parallelisms, comma-separated")
	cs := fs.String("contenders", "loop-raw,loop-json,sluice-json", "contenders, comma-separated: loop-raw, loop-json, loop-avro, goapi, flink, flink-json, flink-json-double, or the name of a pipeline file NAME.yaml in -pipelines; NAME@PATH runs that pipeline with the sluice binary PATH (to compare two builds in one run)")
	pipelines := fs.String("pipelines", "bench/kafka/pipelines", "directory of the sluice pipeline files")
	fs.StringVar(&o.sluice, "sluice", "", "the sluice binary (required when a pipeline contender runs)")
	fs.StringVar(&o.loop, "loop", "", "the loop binary (required when a loop contender runs)")
	fs.StringVar(&o.goapi, "goapi", "", "the goapi binary, bench/kafka/goapi (required when the goapi contender runs)")
	fs.StringVar(&o.flinkJar, "flink-jar", "bench/kafka/flink/target/sluice-bench-flink.jar", "the Flink job's shaded jar (contender flink)")
	fs.StringVar(&o.java, "java", "java", "the java command (contender flink)")
	fs.StringVar(&o.work, "work", "", "work directory for logs, checkpoints and offsets (default: a new temporary directory)")
	fs.StringVar(&o.results, "results", "", "file for the benchstat lines (default WORK/results.txt)")
	fs.StringVar(&o.csv, "csv", "", "file for the per-run CSV (default WORK/results.csv)")
	fs.DurationVar(&o.tsAge, "ts-age", 0, "age of the input records' timestamps (0: the time they are produced; e.g. 72h for old input)")
	fs.BoolVar(&o.warmup, "warmup", true, "run the first contender at the first parallelism once before round 1, unrecorded (warms the broker's JIT and page cache)")
	fs.BoolVar(&o.keep, "keep", false, "keep the output topics (default: deleted after verification)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 10*time.Minute, "a contender still running after this is killed and its run fails")
	fs.DurationVar(&o.readTimeout, "read-timeout", 5*time.Minute, "bound on reading back one output")
	fs.StringVar(&o.format, "format", "json", "the input's values: json (canonical JSON objects) or avro (the Confluent wire format, schema registered at -schema-registry); pick contenders that read it (loop-avro, an Avro pipeline)")
	fs.StringVar(&o.registry, "schema-registry", os.Getenv("SLUICE_SCHEMA_REGISTRY"), "schema registry URL (Confluent-compatible API) for -format avro (default $SLUICE_SCHEMA_REGISTRY); pipelines get it as SCHEMA_REGISTRY and the schema file as AVRO_SCHEMA_FILE")
	fs.StringVar(&o.profile, "profile", "", "write CPU profiles to this directory: loop with -cpuprofile, sluice with SLUICE_CPUPROFILE (needs -sluice built from bench/kafka/sluiceprof)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return usageErr{err}
	}
	o.brokers = splitList(*brokers)
	if len(o.brokers) == 0 {
		return usageErr{errors.New("-brokers (or SLUICE_KAFKA_BROKERS) is required")}
	}
	for _, s := range splitList(*ps) {
		p, err := strconv.Atoi(s)
		if err != nil || p < 1 {
			return usageErr{fmt.Errorf("-p: %q is not a parallelism", s)}
		}
		o.ps = append(o.ps, p)
	}
	if o.records < 1 || o.valueSize < 64 || o.partitions < 1 || o.rounds < 1 || len(o.ps) == 0 {
		return usageErr{errors.New("-records, -partitions, -rounds must be positive, -value-size at least 64, -p not empty")}
	}
	switch {
	case o.format != "json" && o.format != "avro":
		return usageErr{fmt.Errorf("-format: want json or avro, got %q", o.format)}
	case o.format == "avro" && o.registry == "":
		return usageErr{errors.New("-format avro needs -schema-registry (or SLUICE_SCHEMA_REGISTRY)")}
	}
	for _, name := range splitList(*cs) {
		c, err := resolve(name, *pipelines, &o)
		if err != nil {
			return usageErr{err}
		}
		o.contenders = append(o.contenders, c)
	}
	if len(o.contenders) == 0 {
		return usageErr{errors.New("-contenders is empty")}
	}
	if o.brokerPID == 0 {
		if run := os.Getenv("SLUICE_KAFKA_RUN"); run != "" {
			if b, err := os.ReadFile(filepath.Join(run, "pid")); err == nil {
				o.brokerPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
		}
	}
	if o.work == "" {
		dir, err := os.MkdirTemp("", "sluice-bench-")
		if err != nil {
			return err
		}
		o.work = dir
	}
	if err := os.MkdirAll(o.work, 0o755); err != nil {
		return err
	}
	if o.format == "avro" {
		path, err := writeAvroSchema(o.work)
		if err != nil {
			return err
		}
		o.avroSchemaFile = path
	}
	if o.results == "" {
		o.results = filepath.Join(o.work, "results.txt")
	}
	if o.csv == "" {
		o.csv = filepath.Join(o.work, "results.csv")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return bench(ctx, &o, os.Stdout)
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

func bench(ctx context.Context, o *options, out io.Writer) error {
	k, err := newKafka(o.brokers)
	if err != nil {
		return err
	}
	defer k.close()
	tick := clockTick()
	fmt.Fprintf(out, "sluice Kafka → Kafka benchmark: %d %s records × %d bytes in %d partitions; rounds %d; p %v; contenders %s\n",
		o.records, o.format, o.valueSize, o.partitions, o.rounds, o.ps, names(o.contenders))
	fmt.Fprintf(out, "work dir %s; load average at start: %s\n", o.work, loadavg())
	if o.brokerPID == 0 {
		fmt.Fprintln(out, "broker pid unknown (set SLUICE_KAFKA_RUN or -broker-pid): broker CPU not measured")
	}
	in, err := ensureInput(ctx, k, o, out)
	if err != nil {
		return err
	}
	want := expectedHashes(o.records, o.valueSize, o.format)

	csvf, err := os.Create(o.csv)
	if err != nil {
		return err
	}
	defer csvf.Close()
	fmt.Fprintln(csvf, csvHeader)
	resf, err := os.Create(o.results)
	if err != nil {
		return err
	}
	defer resf.Close()
	fmt.Fprintf(resf, "goos: linux\npkg: github.com/sluice-io/sluice/bench/kafka\n")

	if o.warmup {
		r := runOne(ctx, k, o, o.contenders[0], o.ps[0], 0, in, want, tick)
		fmt.Fprintf(out, "warm-up (not counted): %s\n", r.line())
		if r.err != nil {
			return fmt.Errorf("warm-up run failed: %w", r.err)
		}
	}
	var all []result
	for round := 1; round <= o.rounds; round++ {
		for _, p := range o.ps {
			for _, c := range o.contenders {
				if err := ctx.Err(); err != nil {
					return err
				}
				r := runOne(ctx, k, o, c, p, round, in, want, tick)
				all = append(all, r)
				fmt.Fprintln(out, r.line())
				fmt.Fprintln(csvf, r.csv())
				if r.err == nil {
					fmt.Fprintln(resf, r.benchstat())
				}
			}
		}
	}
	fmt.Fprintf(out, "load average at end: %s\n\n", loadavg())
	printTable(out, o, all)
	fmt.Fprintf(out, "\nper-run CSV: %s\nbenchstat lines: %s\n", o.csv, o.results)
	for _, r := range all {
		if r.err != nil {
			return fmt.Errorf("%d of %d runs failed (first: %s p=%d round %d: %w)", countFailed(all), len(all), r.c.name, r.p, r.round, r.err)
		}
	}
	return nil
}

func countFailed(rs []result) int {
	n := 0
	for _, r := range rs {
		if r.err != nil {
			n++
		}
	}
	return n
}

func names(cs []contender) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = c.name
	}
	return strings.Join(s, ",")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
