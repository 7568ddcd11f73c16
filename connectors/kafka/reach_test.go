package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/testutil/tcpproxy"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"github.com/twmb/franz-go/pkg/kgo"
)

// proxyDialer sends every connection of a client to the proxy p, whatever
// address the broker advertises.
func proxyDialer(p *tcpproxy.Proxy) kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, p.Addr())
	})
}

// waitLog waits (bounded) until logs contains s.
func waitLog(t *testing.T, logs *logBuffer, s string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(logs.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log after %v:\n%s", s, within, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOutageThroughProxy: a job reading and writing through a loopback
// proxy keeps running across an outage (the proxy cut, then restored): a
// warning names the broker it cannot reach as soon as it is cut, a line
// says when it is back and how long it was down, and the output is the
// input exactly once.
func TestOutageThroughProxy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) { testOutageThroughProxy(t, b, false) })
}

// TestLongOutageRestarts: an outage longer than the connect timeout (1s)
// fails the job with ErrBrokersUnreachable (logged by the runtime), it
// restarts (each attempt failing after 1s while the proxy is cut), and
// once the proxy is back it finishes with the output exactly once.
func TestLongOutageRestarts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) { testOutageThroughProxy(t, b, true) })
}

func testOutageThroughProxy(t *testing.T, b backend, long bool) {
	brokers := b.brokers
	px := tcpproxy.Start(t, brokers[0])
	defer func(d time.Duration) { unreachableWarnEvery = d }(unreachableWarnEvery)
	unreachableWarnEvery = 200 * time.Millisecond
	in, out := createTopic(t, brokers, 1), createTopic(t, brokers, 1)
	const half = 1000
	prod := newClient(t, brokers, kgo.DefaultProduceTopic(in))
	produce := func(from int) {
		var recs []*kgo.Record
		for i := from; i < from+half; i++ {
			recs = append(recs, kgo.StringRecord(fmt.Sprintf(`{"n":%d}`, i)))
		}
		if err := prod.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(0)

	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	connTimeout, jobLog := time.Minute, stream.DiscardLogger()
	if long {
		connTimeout, jobLog = time.Second, log
	}
	type doc struct{ N int }
	src, err := NewSource(brokers, JSONDeserializer[doc](), Topics(in),
		Bounded(AtOffsets(map[string]map[int32]int64{in: {0: 2 * half}}, Latest())),
		SourceClientOpts(proxyDialer(px)), SourceLogger(log), SourceConnectTimeout(connTimeout))
	if err != nil {
		t.Fatal(err)
	}
	snk, err := NewSink(brokers, JSONSerializer[doc](), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix(uniqueName("outage")), SinkClientOpts(proxyDialer(px)), SinkLogger(log),
		SinkConnectTimeout(connTimeout))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.CheckpointEvery(100*time.Millisecond), stream.Logger(jobLog),
		stream.Restart(restart.FixedDelay(30, 100*time.Millisecond)))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[doc](), "kafka"), snk, "out")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := env.Execute(ctx, "outage")
		done <- err
	}()
	// The first half is out (committed): the reader is now long-polling
	// for the rest through the proxy.
	if got := readCommitted(t, brokers, out, half, time.Second); len(got) < half {
		cancel()
		<-done
		t.Fatalf("only %d records before the outage", len(got))
	}
	px.Down() // dials refused, connections closed
	waitLog(t, &logs, "cannot reach broker", 30*time.Second)
	produce(half) // written directly: only the job's clients are cut off
	waitLog(t, &logs, "still unreachable", 30*time.Second)
	if long {
		waitLog(t, &logs, "brokers unreachable", 30*time.Second)
	}
	if err := px.Up(ctx); err != nil {
		t.Fatal(err)
	}
	if !long {
		// (After a restart the new attempt's clients connect at once:
		// they saw no outage, so they log no recovery.)
		waitLog(t, &logs, "reachable again", 30*time.Second)
	}
	if err := <-done; err != nil {
		t.Fatalf("job: %v\n%s", err, logs.String())
	}
	seen := map[string]int{}
	for _, r := range readCommitted(t, brokers, out, -1, 2*time.Second) {
		seen[string(r.Value)]++
	}
	for i := range 2 * half {
		if n := seen[fmt.Sprintf(`{"N":%d}`, i)]; n != 1 {
			t.Errorf("record %d written %d times", i, n)
		}
	}
	if len(seen) != 2*half {
		t.Errorf("%d distinct records, want %d", len(seen), 2*half)
	}
	lg := logs.String()
	if !strings.Contains(lg, "broker="+brokers[0]) || (!long && !strings.Contains(lg, "down_for=")) {
		t.Errorf("the outage lines name no broker or duration:\n%s", lg)
	}
	t.Log(grepLines(lg, "broker"))
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return strings.Join(out, "\n")
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableFailsBounded: a source or a sink (each guarantee) whose
// broker does not listen fails the job with ErrBrokersUnreachable once
// the connect timeout has passed (not after SetupTimeout or
// FlushTimeout, both 10m here), having logged the broker it tries first.
func TestUnreachableFailsBounded(t *testing.T) {
	type doc struct{ N int }
	run := func(t *testing.T, build func(env *stream.Environment, broker string, log *slog.Logger)) {
		broker := closedPort(t)
		var logs logBuffer
		env := stream.New(stream.CheckpointEvery(100*time.Millisecond), stream.Logger(stream.DiscardLogger()),
			stream.Restart(restart.None()))
		build(env, broker, slog.New(slog.NewTextHandler(&logs, nil)))
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, err := env.Execute(ctx, "unreachable")
		if !errors.Is(err, ErrBrokersUnreachable) {
			t.Fatalf("got %v, want ErrBrokersUnreachable", err)
		}
		if !strings.Contains(err.Error(), broker) {
			t.Errorf("the error names no broker %s: %v", broker, err)
		}
		lg := logs.String()
		warn := strings.Index(lg, "cannot reach broker")
		if warn < 0 || !strings.Contains(lg, "broker="+broker) {
			t.Errorf("no warning naming broker %s:\n%s", broker, lg)
		}
		t.Log(err)
	}
	t.Run("source", func(t *testing.T) {
		run(t, func(env *stream.Environment, broker string, log *slog.Logger) {
			src, err := NewSource([]string{broker}, JSONDeserializer[doc](), Topics("t"), SourceLogger(log),
				SourceConnectTimeout(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			stream.SinkTo(stream.FromSource(env, src, watermark.None[doc](), "kafka"), testsink.NewTwoPhase(testsink.NewStore[doc]()), "out")
		})
	})
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run("sink-"+g.String(), func(t *testing.T) {
			run(t, func(env *stream.Environment, broker string, log *slog.Logger) {
				snk, err := NewSink([]string{broker}, JSONSerializer[doc](), DefaultTopic("t"), DeliveryGuarantee(g),
					TransactionalIDPrefix("unreachable-"+strconv.Itoa(int(g))), SinkLogger(log),
					SinkConnectTimeout(time.Second), SetupTimeout(10*time.Minute), FlushTimeout(10*time.Minute))
				if err != nil {
					t.Fatal(err)
				}
				gen := datagen.New(func(i int64) doc { return doc{int(i)} }, datagen.Count(3))
				stream.SinkTo(stream.FromSource(env, gen, watermark.None[doc](), "gen"), snk, "out")
			})
		})
	}
}
