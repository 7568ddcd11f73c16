package main

// Kafka brokers that cannot be reached, through the binary: the job
// fails within its connect timeout (not after minutes) and its log names
// the broker it tries as soon as it tries it.

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// closedLoopbackPort returns a 127.0.0.1 address nothing listens on.
func closedLoopbackPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// unreachablePipeline is a pipeline whose source (kafka) or sink (kafka)
// has broker addr, with the connect timeout given.
func unreachablePipeline(t *testing.T, side, addr, timeout string) string {
	t.Helper()
	dir := t.TempDir()
	src := "type: datagen\n  options: {count: 1000, splits: 2}"
	snk := fmt.Sprintf("type: file\n  options: {path: %s/out}", dir)
	kafka := fmt.Sprintf("type: kafka\n  options:\n    brokers: [\"%s\"]\n    connect-timeout: %s\n", addr, timeout)
	if side == "source" {
		src = kafka + "    topics: [in]"
	} else {
		snk = kafka + "    topic: out"
	}
	return writeNamedPipeline(t, dir, "p.yaml", fmt.Sprintf(`name: unreachable-%s
parallelism: 1
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: %s/checkpoints
restart:
  strategy: fixed-delay
  attempts: 1
  delay: 100ms
source:
  %s
sink:
  %s
`, side, dir, src, snk))
}

// TestKafkaUnreachableFailsWithinConnectTimeout: a Kafka source or sink
// whose broker does not listen (a closed loopback port) makes `sluice
// run` exit 1 after its connect timeout (1s here, once more after the
// one restart), with a warning naming the broker and an error saying the
// brokers were unreachable. Before, the sink waited for its 2m setup
// timeout per attempt, silently.
func TestKafkaUnreachableFailsWithinConnectTimeout(t *testing.T) {
	for _, side := range []string{"source", "sink"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel() // each waits for its connect timeout
			addr := closedLoopbackPort(t)
			r := run(t, nil, "run", "--progress", "off", unreachablePipeline(t, side, addr, "1s"))
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			warn := regexp.MustCompile(`level=WARN msg="kafka ` + side + `: cannot reach broker; retrying".*broker=` + regexp.QuoteMeta(addr))
			if !warn.MatchString(r.stderr) {
				t.Errorf("no warning naming broker %s:\n%s", addr, r.stderr)
			}
			if !strings.Contains(r.stderr, "brokers unreachable") || !strings.Contains(r.stderr, "connect timeout 1s") {
				t.Errorf("the failure does not say the brokers were unreachable:\n%s", r.stderr)
			}
		})
	}
}

// TestKafkaUnreachableLogsAtOnce: the warning naming the unreachable
// broker comes as soon as the first connection fails, long before the
// connect timeout (10s here) fails anything: when the test sees it (it
// waits with only a hang guard), no failure has been logged yet. SIGTERM
// then stops the job. (An exactly-once sink's writer start cannot be
// interrupted: sink.InitContext carries no context, so that stop waits
// for the connect timeout.)
func TestKafkaUnreachableLogsAtOnce(t *testing.T) {
	for _, side := range []string{"source", "sink"} {
		t.Run(side, func(t *testing.T) {
			t.Parallel() // the sink's stop waits for its connect timeout
			addr := closedLoopbackPort(t)
			p := start(t, nil, "run", "--progress", "off", unreachablePipeline(t, side, addr, "10s"))
			got := p.waitLine(t, regexp.MustCompile(`level=WARN msg="kafka `+side+`: cannot reach broker; retrying".*broker=(\S+)`))
			if got != addr {
				t.Errorf("warning names broker %s, want %s", got, addr)
			}
			if strings.Contains(p.stderr(), "brokers unreachable") {
				t.Errorf("the job failed before the first warning:\n%s", p.stderr())
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
		})
	}
}
