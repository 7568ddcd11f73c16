// Command startup measures how long the sluice binary takes to start,
// against floors measured in the same run: a hello-world Go binary
// (bench/startup/hello) and the Kafka benchmark's hand-written franz-go
// loop (bench/kafka/loop, with -h). bench/startup/run.sh builds the
// binaries and runs it; bench/startup/README.md defines what is measured.
//
// Each round runs every contender once per measure, in an order rotated
// from round to round (interleaved), after -warmup rounds that are not
// counted. The measures:
//
//   - exit: `sluice version` (hello: no arguments; loop: -h), from the
//     fork to the exit of the process: the runtime, package
//     initialisation, a line of output.
//   - init: the same with GODEBUG=inittrace=1: the sum of the clock time of
//     every package's initialisation, the bytes and allocations it made,
//     and when main started (the end of the last init).
//   - run-print, run-file (sluice only): `sluice run` of a bounded
//     pipeline of -count datagen records into the print sink
//     (at-least-once), and into the file sink (exactly-once, with a
//     checkpoint directory): the time to the first record on stdout
//     (print), and to the exit. Neither connects to anything outside the
//     process. Every run's output is checked (-count lines).
//
// Every measure reports the wall time, the CPU time (user + system) and
// the peak RSS (ru_maxrss) of the process. Go starts a child with vfork
// semantics, and Linux counts the parent's peak RSS at the exec in the
// child's ru_maxrss, so an RSS at or below the driver's own (printed) is
// the driver's: the hello floor's RSS is not measured, sluice's is.
//
// It prints Markdown tables of medians with [min–max], the load average
// at the start and the end, and the slowest package initialisations of
// each sluice binary; with -benchstat DIR it also writes one file per
// contender in the benchmark format that benchstat reads.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// contender is one binary under measurement.
type contender struct {
	name string
	path string
	// args are its arguments for the exit and init measures.
	args []string
	// sluice binaries also run the pipelines.
	sluice bool
}

type options struct {
	contenders []contender
	rounds     int
	warmup     int
	count      int
	timeout    time.Duration
	top        int
	work       string
	benchstat  string
}

// sample is one measured process.
type sample struct {
	wall   time.Duration
	first  time.Duration // run-print: to the first line on stdout
	cpu    time.Duration
	rssKiB int64

	// init only (GODEBUG=inittrace=1).
	initMS     float64            // sum of every package's clock time
	initBytes  int64              // allocated by package initialisation
	initAllocs int64              // allocations of package initialisation
	mainAtMS   float64            // when main started, ms after the runtime started
	pkgMS      map[string]float64 // clock time per package
	pkgBytes   map[string]int64
}

const (
	mExit     = "exit"
	mInit     = "init"
	mRunPrint = "run-print"
	mRunFile  = "run-file"
)

type key struct{ contender, measure string }

func main() {
	o, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err == nil {
		err = run(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "startup:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("startup", flag.ContinueOnError)
	sluice := fs.String("sluice", "", "the sluice binary to measure (required)")
	base := fs.String("base", "", "a second sluice binary to measure in the same rounds, reported as sluice@base (say, main's before a change)")
	hello := fs.String("hello", "", "the hello-world floor (bench/startup/hello); empty: left out")
	loop := fs.String("loop", "", "the Kafka benchmark's loop (bench/kafka/loop), measured with -h; empty: left out")
	fs.IntVar(&o.rounds, "rounds", 20, "measured rounds")
	fs.IntVar(&o.warmup, "warmup", 1, "rounds run first and not counted (page cache, CPU frequency)")
	fs.IntVar(&o.count, "count", 10, "records of the run-print and run-file pipelines")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "longest a single process may take before it is killed and the run fails")
	fs.IntVar(&o.top, "top", 10, "slowest package initialisations listed per sluice binary")
	fs.StringVar(&o.work, "work", "", "directory for pipelines and their output (default: a new temporary directory, removed at the end)")
	fs.StringVar(&o.benchstat, "benchstat", "", "also write <contender>.txt in benchstat's format into this directory")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *sluice == "" {
		return o, errors.New("-sluice is required")
	}
	if o.rounds < 1 || o.warmup < 0 || o.count < 1 {
		return o, fmt.Errorf("-rounds %d, -warmup %d, -count %d: want at least 1, 0 and 1", o.rounds, o.warmup, o.count)
	}
	o.contenders = append(o.contenders, contender{name: "sluice", path: *sluice, args: []string{"version"}, sluice: true})
	if *base != "" {
		o.contenders = append(o.contenders, contender{name: "sluice@base", path: *base, args: []string{"version"}, sluice: true})
	}
	if *hello != "" {
		o.contenders = append(o.contenders, contender{name: "hello", path: *hello})
	}
	if *loop != "" {
		o.contenders = append(o.contenders, contender{name: "loop", path: *loop, args: []string{"-h"}})
	}
	return o, nil
}

func run(o options, out io.Writer) error {
	if o.work == "" {
		dir, err := os.MkdirTemp("", "sluice-startup.")
		if err != nil {
			return fmt.Errorf("work directory: %w", err)
		}
		defer os.RemoveAll(dir)
		o.work = dir
	}
	startLoad := loadavg()
	startTime := time.Now()
	res := map[key][]sample{}
	runs := 0
	for round := range o.warmup + o.rounds {
		for _, m := range []string{mExit, mInit, mRunPrint, mRunFile} {
			for i := range o.contenders {
				c := o.contenders[(i+round)%len(o.contenders)]
				if !c.sluice && (m == mRunPrint || m == mRunFile) {
					continue
				}
				s, err := measure(o, c, m, runs)
				runs++
				if err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", round, c.name, m, err)
				}
				if round >= o.warmup {
					k := key{c.name, m}
					res[k] = append(res[k], s)
				}
			}
		}
	}
	report(out, o, res, startLoad, time.Since(startTime))
	if o.benchstat != "" {
		return writeBenchstat(o, res)
	}
	return nil
}

// measure runs contender c once for measure m.
func measure(o options, c contender, m string, n int) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var cmd *exec.Cmd
	var dir string
	switch m {
	case mExit, mInit:
		cmd = exec.CommandContext(ctx, c.path, c.args...)
		if m == mInit {
			cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		}
	case mRunPrint, mRunFile:
		dir = filepath.Join(o.work, strconv.Itoa(n))
		p, err := writePipeline(dir, m, o.count)
		if err != nil {
			return sample{}, err
		}
		defer os.RemoveAll(dir)
		cmd = exec.CommandContext(ctx, c.path, "run", "--progress", "off", "--log-level", "warn", p)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return sample{}, err
	}

	var s sample
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return s, err
	}
	lines, first, rerr := readLines(stdout)
	err = cmd.Wait()
	s.wall = time.Since(start)
	if !first.IsZero() {
		s.first = first.Sub(start)
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		return s, fmt.Errorf("%s %s: %w; stderr:\n%s", c.path, strings.Join(cmd.Args[1:], " "), err, tailLines(stderr.String(), 10))
	}
	ps := cmd.ProcessState
	s.cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		s.rssKiB = ru.Maxrss
	}

	switch m {
	case mInit:
		if err := parseInitTrace(stderr.String(), &s); err != nil {
			return s, err
		}
	case mRunPrint:
		if lines != o.count {
			return s, fmt.Errorf("run-print wrote %d lines, want %d", lines, o.count)
		}
	case mRunFile:
		got, err := countOutputLines(filepath.Join(dir, "output"))
		if err != nil {
			return s, err
		}
		if got != o.count {
			return s, fmt.Errorf("run-file committed %d records, want %d", got, o.count)
		}
	}
	return s, nil
}

// readLines reads r to its end and returns how many lines it held and
// when the first one arrived.
func readLines(r io.Reader) (int, time.Time, error) {
	br := bufio.NewReader(r)
	var first time.Time
	lines := 0
	for {
		_, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if lines == 0 {
				first = time.Now()
			}
			lines++
		case errors.Is(err, bufio.ErrBufferFull):
			// A line longer than the buffer: the rest follows.
		case errors.Is(err, io.EOF):
			return lines, first, nil
		default:
			return lines, first, err
		}
	}
}

// writePipeline writes the pipeline of measure m into dir.
func writePipeline(dir, m string, count int) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var y string
	switch m {
	case mRunPrint:
		y = fmt.Sprintf(`name: startup-print
source:
  type: datagen
  options:
    count: %d
sink:
  type: print
`, count)
	case mRunFile:
		y = fmt.Sprintf(`name: startup-file
delivery: exactly-once
checkpoint:
  dir: %q
source:
  type: datagen
  options:
    count: %d
sink:
  type: file
  options:
    path: %q
`, filepath.Join(dir, "checkpoints"), count, filepath.Join(dir, "output"))
	}
	p := filepath.Join(dir, "pipeline.yaml")
	return p, os.WriteFile(p, []byte(y), 0o644)
}

// countOutputLines counts the lines of the file sink's committed files
// under dir: its in-progress files are hidden (their names start with a
// dot) and left out.
func countOutputLines(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n += bytes.Count(b, []byte("\n"))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("counting the file sink's output in %s: %w", dir, err)
	}
	return n, nil
}

// initLine is one line of GODEBUG=inittrace=1:
// "init net/http @12 ms, 0.31 ms clock, 58256 bytes, 545 allocs".
var initLine = regexp.MustCompile(`^init (\S+) @([0-9.]+) ms, ([0-9.]+) ms clock, ([0-9]+) bytes, ([0-9]+) allocs$`)

func parseInitTrace(stderr string, s *sample) error {
	s.pkgMS = map[string]float64{}
	s.pkgBytes = map[string]int64{}
	for line := range strings.Lines(stderr) {
		m := initLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		at, _ := strconv.ParseFloat(m[2], 64)
		clock, _ := strconv.ParseFloat(m[3], 64)
		b, _ := strconv.ParseInt(m[4], 10, 64)
		a, _ := strconv.ParseInt(m[5], 10, 64)
		s.initMS += clock
		s.initBytes += b
		s.initAllocs += a
		s.mainAtMS = max(s.mainAtMS, at+clock)
		s.pkgMS[m[1]] += clock
		s.pkgBytes[m[1]] += b
	}
	if len(s.pkgMS) == 0 {
		return fmt.Errorf("no inittrace lines on stderr:\n%s", tailLines(stderr, 10))
	}
	return nil
}

func report(w io.Writer, o options, res map[key][]sample, startLoad string, took time.Duration) {
	fmt.Fprintf(w, "start-up: %d rounds after %d warm-up, interleaved; medians [min–max]; %d records per pipeline; took %s\n",
		o.rounds, o.warmup, o.count, took.Round(100*time.Millisecond))
	fmt.Fprintf(w, "load average at start: %s, at end: %s; %d CPUs\n", startLoad, loadavg(), runtime.NumCPU())
	fmt.Fprintf(w, "driver's own peak RSS: %.1f MiB (an RSS at or below it is the driver's, not the child's)\n\n", float64(selfHWM())/1024)

	fmt.Fprintln(w, "| contender | exit ms | CPU ms | peak RSS MiB | init ms (inittrace) | main starts at ms | init MiB allocated | init allocs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, c := range o.contenders {
		e, i := res[key{c.name, mExit}], res[key{c.name, mInit}]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name+" "+strings.Join(c.args, " "),
			stat(e, func(s sample) float64 { return ms(s.wall) }),
			stat(e, func(s sample) float64 { return ms(s.cpu) }),
			stat(e, func(s sample) float64 { return float64(s.rssKiB) / 1024 }),
			stat(i, func(s sample) float64 { return s.initMS }),
			stat(i, func(s sample) float64 { return s.mainAtMS }),
			stat(i, func(s sample) float64 { return float64(s.initBytes) / (1 << 20) }),
			stat(i, func(s sample) float64 { return float64(s.initAllocs) }))
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "| contender | pipeline | first record ms | exit ms | CPU ms | peak RSS MiB |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, c := range o.contenders {
		if !c.sluice {
			continue
		}
		for _, m := range []string{mRunPrint, mRunFile} {
			v := res[key{c.name, m}]
			first := "–"
			if m == mRunPrint {
				first = stat(v, func(s sample) float64 { return ms(s.first) })
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", c.name, pipelineName(m, o.count), first,
				stat(v, func(s sample) float64 { return ms(s.wall) }),
				stat(v, func(s sample) float64 { return ms(s.cpu) }),
				stat(v, func(s sample) float64 { return float64(s.rssKiB) / 1024 }))
		}
	}

	for _, c := range o.contenders {
		if !c.sluice || o.top <= 0 {
			continue
		}
		v := res[key{c.name, mInit}]
		pkgs := map[string]bool{}
		for _, s := range v {
			for p := range s.pkgMS {
				pkgs[p] = true
			}
		}
		type row struct {
			pkg string
			ms  float64
			kib float64
		}
		var rows []row
		for p := range pkgs {
			rows = append(rows, row{p,
				median(values(v, func(s sample) float64 { return s.pkgMS[p] })),
				median(values(v, func(s sample) float64 { return float64(s.pkgBytes[p]) / 1024 }))})
		}
		slices.SortFunc(rows, func(a, b row) int {
			if a.ms != b.ms {
				if a.ms > b.ms {
					return -1
				}
				return 1
			}
			return strings.Compare(a.pkg, b.pkg)
		})
		fmt.Fprintf(w, "\nslowest package initialisations of %s (median clock ms over the rounds; %d packages):\n\n", c.name, len(rows))
		fmt.Fprintln(w, "| package | init ms | KiB allocated |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, r := range rows[:min(o.top, len(rows))] {
			fmt.Fprintf(w, "| %s | %.2f | %.0f |\n", r.pkg, r.ms, r.kib)
		}
	}
}

func pipelineName(m string, count int) string {
	if m == mRunPrint {
		return fmt.Sprintf("datagen → print, %d records", count)
	}
	return fmt.Sprintf("datagen → file, exactly-once, %d records", count)
}

// writeBenchstat writes dir/<contender>.txt: one benchmark line per
// measured process, so that `benchstat dir/sluice@base.txt dir/sluice.txt`
// compares two binaries.
func writeBenchstat(o options, res map[key][]sample) error {
	if err := os.MkdirAll(o.benchstat, 0o755); err != nil {
		return err
	}
	for _, c := range o.contenders {
		var b strings.Builder
		fmt.Fprintf(&b, "goos: linux\npkg: github.com/sluice-io/sluice/bench/startup\n")
		for _, m := range []string{mExit, mInit, mRunPrint, mRunFile} {
			for _, s := range res[key{c.name, m}] {
				fmt.Fprintf(&b, "BenchmarkStartup/%s 1 %d ns/op %d cpu-ns/op %d peak-RSS-KiB", m, s.wall.Nanoseconds(), s.cpu.Nanoseconds(), s.rssKiB)
				if m == mInit {
					fmt.Fprintf(&b, " %.3f init-ms %d init-B", s.initMS, s.initBytes)
				}
				if m == mRunPrint {
					fmt.Fprintf(&b, " %d first-record-ns", s.first.Nanoseconds())
				}
				b.WriteString("\n")
			}
		}
		if err := os.WriteFile(filepath.Join(o.benchstat, c.name+".txt"), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func values(v []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(v))
	for i, s := range v {
		out[i] = f(s)
	}
	return out
}

// stat formats the median and range of f over v.
func stat(v []sample, f func(sample) float64) string {
	if len(v) == 0 {
		return "–"
	}
	x := values(v, f)
	return fmt.Sprintf("%s [%s–%s]", num(median(x)), num(slices.Min(x)), num(slices.Max(x)))
}

func num(x float64) string {
	switch {
	case x >= 10000:
		return fmt.Sprintf("%.0fk", x/1000)
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	default:
		return fmt.Sprintf("%.1f", x)
	}
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

// selfHWM is the driver's own peak RSS in KiB (VmHWM), 0 if unknown.
func selfHWM() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
