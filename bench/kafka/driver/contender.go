package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A contender is one way of copying the input to the output: the loop
// with a codec, a sluice pipeline file, or the Flink job.
type contender struct {
	name     string
	kind     string // loop, sluice, flink, goapi
	codec    string // loop: raw or json
	pipeline string // sluice: the pipeline file
	binary   string // sluice: the binary (-sluice, or the one after @)
}

// resolve finds the contender of a -contenders item: loop-raw, loop-json,
// loop-avro, flink, flink-json, or the name of a pipeline file, optionally
// with @PATH, a sluice binary of its own (before/after comparisons of two
// builds in one run; the contender is then named NAME@<file name>).
func resolve(name, pipelines string, o *options) (contender, error) {
	if base, bin, ok := strings.Cut(name, "@"); ok {
		if _, err := os.Stat(bin); err != nil {
			return contender{}, fmt.Errorf("contender %s: %w", name, err)
		}
		abs, err := filepath.Abs(bin)
		if err != nil {
			return contender{}, err
		}
		c, err := resolvePipeline(base, pipelines, abs)
		c.name = base + "@" + filepath.Base(bin)
		return c, err
	}
	switch name {
	case "loop-raw", "loop-json", "loop-avro":
		if o.loop == "" {
			return contender{}, fmt.Errorf("contender %s needs -loop", name)
		}
		return contender{name: name, kind: "loop", codec: strings.TrimPrefix(name, "loop-")}, nil
	case "goapi":
		if o.goapi == "" {
			return contender{}, fmt.Errorf("contender goapi needs -goapi")
		}
		return contender{name: name, kind: "goapi"}, nil
	case "flink", "flink-json", "flink-json-double":
		if _, err := os.Stat(o.flinkJar); err != nil {
			return contender{}, fmt.Errorf("contender flink: %w (build it: mvn -f bench/kafka/flink/pom.xml package)", err)
		}
		abs, err := filepath.Abs(o.flinkJar) // the job runs in its run's directory
		if err != nil {
			return contender{}, err
		}
		o.flinkJar = abs
		codec := "raw"
		if name != "flink" {
			codec = strings.TrimPrefix(name, "flink-") // json, json-double
		}
		return contender{name: name, kind: "flink", codec: codec}, nil
	}
	if o.sluice == "" {
		return contender{}, fmt.Errorf("contender %s needs -sluice (or NAME@PATH)", name)
	}
	return resolvePipeline(name, pipelines, o.sluice)
}

func resolvePipeline(name, pipelines, binary string) (contender, error) {
	path := filepath.Join(pipelines, name+".yaml")
	if _, err := os.Stat(path); err != nil {
		return contender{}, fmt.Errorf("contender %s: no pipeline file: %w", name, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return contender{}, err
	}
	return contender{name: name, kind: "sluice", pipeline: abs, binary: binary}, nil
}

// command returns the process that copies in to out at parallelism p.
// dir is the run's own directory (checkpoints, offsets, logs).
func (c contender) command(ctx context.Context, o *options, in, out string, p int, dir string) *exec.Cmd {
	brokers := strings.Join(o.brokers, ",")
	var cmd *exec.Cmd
	switch c.kind {
	case "loop":
		args := []string{"-brokers", brokers, "-in", in, "-out", out, "-p", strconv.Itoa(p), "-codec", c.codec,
			"-offsets-dir", dir}
		if c.codec == "avro" {
			args = append(args, "-schema-registry", o.registry)
		}
		if o.profile != "" {
			args = append(args, "-cpuprofile", filepath.Join(o.profile, filepath.Base(dir)+".cpu.pprof"))
		}
		cmd = exec.CommandContext(ctx, o.loop, args...)
	case "goapi":
		args := []string{"-brokers", brokers, "-in", in, "-out", out, "-p", strconv.Itoa(p),
			"-checkpoint-dir", filepath.Join(dir, "checkpoints")}
		if o.profile != "" {
			args = append(args, "-cpuprofile", filepath.Join(o.profile, filepath.Base(dir)+".cpu.pprof"))
		}
		cmd = exec.CommandContext(ctx, o.goapi, args...)
	case "flink":
		cmd = exec.CommandContext(ctx, o.java, "-Xmx1g", "-jar", o.flinkJar,
			"--brokers", brokers, "--in", in, "--out", out, "--parallelism", strconv.Itoa(p), "--codec", c.codec,
			"--checkpoint-interval-ms", "1000", "--checkpoint-dir", "file://"+filepath.Join(dir, "checkpoints"))
	default:
		cmd = exec.CommandContext(ctx, c.binary, "run", "--progress", "off", "--log-level", "warn", c.pipeline)
		cmd.Env = append(os.Environ(), "BROKERS="+brokers, "IN="+in, "OUT="+out, "P="+strconv.Itoa(p),
			"CKDIR="+filepath.Join(dir, "checkpoints"))
		if o.format == "avro" {
			cmd.Env = append(cmd.Env, "SCHEMA_REGISTRY="+o.registry, "AVRO_SCHEMA_FILE="+o.avroSchemaFile)
		}
		if o.profile != "" {
			cmd.Env = append(cmd.Env, "SLUICE_CPUPROFILE="+filepath.Join(o.profile, filepath.Base(dir)+".cpu.pprof"))
		}
	}
	cmd.Dir = dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	return cmd
}

// runOne runs contender c once at parallelism p and measures and
// verifies it.
func runOne(ctx context.Context, k *kafka, o *options, c contender, p, round int, in string, want []uint64, tick float64) result {
	r := result{c: c, p: p, round: round, records: len(want), firstMS: -1}
	stamp := time.Now().UnixMilli()
	out := fmt.Sprintf("bench-out-%s-p%d-r%d-%d", topicSafe.Replace(c.name), p, round, stamp)
	dir := filepath.Join(o.work, fmt.Sprintf("%s-p%d-r%d", c.name, p, round))
	if err := os.RemoveAll(dir); err != nil {
		r.err = err
		return r
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.err = err
		return r
	}
	logAppend := "LogAppendTime"
	if err := k.createTopic(ctx, out, o.partitions, map[string]*string{"message.timestamp.type": &logAppend}); err != nil {
		r.err = err
		return r
	}
	if !o.keep {
		defer func() {
			if err := k.deleteTopic(context.WithoutCancel(ctx), out); err != nil {
				fmt.Fprintln(os.Stderr, "driver:", err)
			}
		}()
	}

	if err := k.waitTopic(ctx, out, o.partitions); err != nil {
		r.err = err
		return r
	}

	rctx, cancel := context.WithTimeout(ctx, o.runTimeout)
	defer cancel()
	cmd := c.command(rctx, o, in, out, p, dir)
	logPath := filepath.Join(dir, "output.log")
	logf, err := os.Create(logPath)
	if err != nil {
		r.err = err
		return r
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf

	brokerBefore, berr := procCPU(o.brokerPID, tick)
	start := time.Now()
	err = cmd.Start()
	if err == nil {
		hwm := watchHWM(cmd.Process.Pid)
		err = cmd.Wait()
		r.rssMB = hwm.stop()
	}
	r.wall = time.Since(start)
	brokerAfter, berr2 := procCPU(o.brokerPID, tick)
	if berr == nil && berr2 == nil && o.brokerPID != 0 {
		r.brokerCPU = brokerAfter - brokerBefore
	} else {
		r.brokerCPU = -1
	}
	if ps := cmd.ProcessState; ps != nil {
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			// Not ru_maxrss: Go starts a child with vfork semantics
			// (CLONE_VM), and Linux keeps the high-water mark of the mm
			// it shared with the driver across exec, so ru_maxrss is at
			// least the driver's own peak RSS. See watchHWM.
			r.cpu = tv(ru.Utime) + tv(ru.Stime)
		}
	}
	if err != nil {
		r.err = fmt.Errorf("%s: %w; last lines of %s:\n%s", c.name, err, logPath, tail(logPath, 15))
		return r
	}
	rb, err := k.readOutput(ctx, out, o.format, len(want), o.readTimeout)
	if err != nil {
		r.err = err
		return r
	}
	if doubles(c.name) {
		want = expectedDoubledHashes(len(want), o.valueSize)
	}
	missing, extra := diff(want, rb.hashes)
	switch {
	case missing > 0 || extra > 0:
		r.err = fmt.Errorf("output of %s is not the input: %d records read, %d missing, %d extra (duplicates or changed values)",
			c.name, len(rb.hashes), missing, extra)
		return r
	case rb.badHeader > 0:
		r.err = fmt.Errorf("output topic %s: %d values without the Avro wire format's header", out, rb.badHeader)
		return r
	case rb.wrongTSTyp > 0:
		r.err = fmt.Errorf("output topic %s: %d records without LogAppendTime timestamps", out, rb.wrongTSTyp)
		return r
	}
	r.steady = steadyRate(rb.appendMS)
	r.firstMS = firstRecordMS(start, rb.appendMS)
	return r
}

// hwmWatch samples a process's peak resident set size.
type hwmWatch struct {
	done chan struct{}
	max  chan float64
}

// watchHWM samples VmHWM of /proc/<pid>/status, the peak RSS of the
// process's own memory since its exec, every 20 ms until stop. The last
// sample is at most 20 ms before the process exits; VmHWM only grows, so
// it misses at most the growth of those last milliseconds.
func watchHWM(pid int) *hwmWatch {
	w := &hwmWatch{done: make(chan struct{}), max: make(chan float64, 1)}
	go func() {
		var peak float64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := vmHWM(pid); err == nil && v > peak {
				peak = v
			}
			select {
			case <-w.done:
				w.max <- peak
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the peak in MiB.
func (w *hwmWatch) stop() float64 {
	close(w.done)
	return <-w.max
}

// vmHWM returns VmHWM of process pid in MiB.
func vmHWM(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseFloat(f[0], 64)
				return kb / 1024, err
			}
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// topicSafe maps a contender's name into Kafka's topic characters.
var topicSafe = strings.NewReplacer("@", "_at_", "/", "_")

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }

// procCPU returns user+system CPU-seconds of process pid from
// /proc/<pid>/stat.
func procCPU(pid int, tick float64) (float64, error) {
	if pid == 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	// The command (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return (ut + st) / tick, nil
}

// clockTick is the kernel's clock ticks per second (getconf CLK_TCK; 100
// if that fails, as on every common Linux).
func clockTick() float64 {
	b, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil && v > 0 {
			return v
		}
	}
	return 100
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
