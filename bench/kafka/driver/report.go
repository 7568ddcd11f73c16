package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one run of one contender.
type result struct {
	c         contender
	p, round  int
	records   int
	wall      time.Duration
	steady    float64 // records/s between the 10th and 90th percentile of append times; 0 if unknown
	cpu       float64 // process user+system CPU-seconds
	brokerCPU float64 // broker CPU-seconds during the run; -1 if not measured
	rssMB     float64 // peak RSS of the process, MiB
	firstMS   float64 // ms from the process's start to the first output record's append time; -1 if unknown
	err       error
}

func (r result) perM(v float64) float64 { return v / float64(r.records) * 1e6 }

func (r result) wallRate() float64 { return float64(r.records) / r.wall.Seconds() }

func (r result) line() string {
	if r.err != nil {
		return fmt.Sprintf("round %d %-18s p=%d FAILED after %v: %v", r.round, r.c.name, r.p, r.wall.Round(time.Millisecond), r.err)
	}
	return fmt.Sprintf("round %d %-18s p=%d wall %6.2fs (%8.0f records/s)  steady %8.0f records/s  CPU %6.2fs (%5.2f s/M)  broker CPU %s  peak RSS %4.0f MiB  first record %4.0f ms  verified",
		r.round, r.c.name, r.p, r.wall.Seconds(), r.wallRate(), r.steady, r.cpu, r.perM(r.cpu), r.brokerString(), r.rssMB, r.firstMS)
}

func (r result) brokerString() string {
	if r.brokerCPU < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fs (%.2f s/M)", r.brokerCPU, r.perM(r.brokerCPU))
}

const csvHeader = "contender,p,round,records,wall_s,wall_records_per_s,steady_records_per_s,cpu_s,cpu_s_per_million,broker_cpu_s,broker_cpu_s_per_million,peak_rss_mib,verified,error,first_record_ms"

func (r result) csv() string {
	verified, msg := "true", ""
	if r.err != nil {
		verified = "false"
		msg = strings.ReplaceAll(strings.ReplaceAll(r.err.Error(), "\n", " | "), `"`, `""`)
	}
	broker, brokerM := "", ""
	if r.brokerCPU >= 0 {
		broker, brokerM = fmt.Sprintf("%.3f", r.brokerCPU), fmt.Sprintf("%.3f", r.perM(r.brokerCPU))
	}
	first := ""
	if r.err == nil && r.firstMS >= 0 {
		first = fmt.Sprintf("%.0f", r.firstMS)
	}
	return fmt.Sprintf("%s,%d,%d,%d,%.3f,%.0f,%.0f,%.3f,%.3f,%s,%s,%.1f,%s,\"%s\",%s",
		r.c.name, r.p, r.round, r.records, r.wall.Seconds(), r.wallRate(), r.steady, r.cpu, r.perM(r.cpu),
		broker, brokerM, r.rssMB, verified, msg, first)
}

// benchstat returns the run as a line of Go's benchmark format: one
// iteration, the wall time as ns/op, and the other figures as custom units.
func (r result) benchstat() string {
	s := fmt.Sprintf("BenchmarkKafkaCopy/contender=%s/p=%d 1 %d ns/op %.0f records/s %.0f wall-records/s %.3f cpu-s/Mrec",
		r.c.name, r.p, r.wall.Nanoseconds(), r.steady, r.wallRate(), r.perM(r.cpu))
	if r.brokerCPU >= 0 {
		s += fmt.Sprintf(" %.3f broker-cpu-s/Mrec", r.perM(r.brokerCPU))
	}
	s += fmt.Sprintf(" %.1f peak-RSS-MiB", r.rssMB)
	if r.firstMS >= 0 {
		s += fmt.Sprintf(" %.0f first-record-ms", r.firstMS)
	}
	return s
}

// printTable prints, per contender and parallelism, the medians of the
// verified runs with their ranges.
func printTable(w io.Writer, o *options, all []result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "contender\tp\truns\tsteady records/s: median [min–max]\t× loop-raw\twall records/s\tCPU-s per M records\tbroker CPU-s per M\tpeak RSS MiB\tfirst record ms")
	loopRaw := map[int]float64{}
	type key struct {
		name string
		p    int
	}
	rows := map[key][]result{}
	for _, r := range all {
		if r.err == nil {
			rows[key{r.c.name, r.p}] = append(rows[key{r.c.name, r.p}], r)
		}
	}
	for _, p := range o.ps {
		if rs := rows[key{"loop-raw", p}]; len(rs) > 0 {
			loopRaw[p] = median(collect(rs, func(r result) float64 { return r.steady }))
		}
	}
	for _, p := range o.ps {
		for _, c := range o.contenders {
			rs := rows[key{c.name, p}]
			failed := 0
			for _, r := range all {
				if r.err != nil && r.c.name == c.name && r.p == p {
					failed++
				}
			}
			runs := fmt.Sprintf("%d", len(rs))
			if failed > 0 {
				runs += fmt.Sprintf(" (+%d failed)", failed)
			}
			if len(rs) == 0 {
				fmt.Fprintf(tw, "%s\t%d\t%s\t–\t–\t–\t–\t–\t–\t–\n", c.name, p, runs)
				continue
			}
			steady := collect(rs, func(r result) float64 { return r.steady })
			ratio := "–"
			if base := loopRaw[p]; base > 0 {
				ratio = fmt.Sprintf("%.2f", median(steady)/base)
			}
			broker := "n/a"
			if bs := collect(rs, func(r result) float64 { return r.perM(r.brokerCPU) }); rs[0].brokerCPU >= 0 {
				broker = medRange(bs, "%.2f")
			}
			first := "n/a"
			if fs := collect(rs, func(r result) float64 { return r.firstMS }); slices.Min(fs) >= 0 {
				first = medRange(fs, "%.0f")
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.name, p, runs,
				medRange(steady, "%.0f"), ratio,
				medRange(collect(rs, result.wallRate), "%.0f"),
				medRange(collect(rs, func(r result) float64 { return r.perM(r.cpu) }), "%.2f"),
				broker,
				medRange(collect(rs, func(r result) float64 { return r.rssMB }), "%.0f"),
				first)
		}
	}
	tw.Flush()
}

func collect(rs []result, f func(result) float64) []float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return v
}

func medRange(v []float64, f string) string {
	if len(v) == 1 {
		return fmt.Sprintf(f, v[0])
	}
	return fmt.Sprintf(f+" ["+f+"–"+f+"]", median(v), slices.Min(v), slices.Max(v))
}
