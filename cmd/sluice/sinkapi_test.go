package main

// Signals while an exactly-once Kafka sink's writer is starting, through
// the binary.

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalDuringKafkaWriterStart: an exactly-once Kafka sink whose
// broker does not listen (a closed loopback port) and whose connect
// timeout is an hour keeps its writer starting (it retries the broker).
// SIGTERM asks for a clean stop; with no task running yet the stop
// cancels the start, and the writer start, which runs under the job's
// context, gives up at once: the process exits 0 (cancelled by a signal,
// docs/cli.md) after one signal instead of after the sink's setup timeout.
func TestSignalDuringKafkaWriterStart(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	addr := closedLoopbackPort(t)
	file := writeNamedPipeline(t, dir, "p.yaml", fmt.Sprintf(`name: start-blocked
parallelism: 1
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: %s/checkpoints
source:
  type: datagen
  options: {count: 1000, splits: 2}
sink:
  type: kafka
  options:
    brokers: ["%s"]
    connect-timeout: 1h
    topic: out
`, dir, addr))
	p := start(t, nil, "run", "--progress", "off", file)
	// The writer is starting: it has tried the broker.
	p.waitLine(t, regexp.MustCompile(`(kafka sink: cannot reach broker; retrying)`))
	// One SIGTERM is enough: with no task running yet there is no final
	// checkpoint to take, so the stop cancels the start.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { <-p.done; close(exited) }()
	select {
	case <-exited:
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit %d, want 0 (cancelled by a signal)\n%s", code, p.stderr())
		}
	case <-time.After(time.Minute): // a hang guard, below the 2-minute setup timeout
		t.Fatalf("sluice did not exit within a minute of SIGTERM: its Kafka writer start ignores the stop\n%s", p.stderr())
	}
	if !strings.Contains(p.stderr(), "CANCELED") || !strings.Contains(p.stderr(), "stop requested while the job was starting") {
		t.Errorf("the job was not reported cancelled for a stop while starting:\n%s", p.stderr())
	}
}
