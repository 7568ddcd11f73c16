package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"github.com/twmb/franz-go/pkg/kgo"
)

// proxy is a TCP proxy on 127.0.0.1 to one target that can be cut (its
// listener and every connection closed: dials are refused) and restored
// on the same port.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.cut(); p.wg.Wait() })
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			p.wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer p.wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
			}
			go pipe(u, c)
			go pipe(c, u)
		}
	}()
}

// cut closes the listener and every connection.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

// restore listens again on the same address (bounded retries).
func (p *proxy) restore() {
	var err error
	for range 100 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			p.serve(ln)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("restore proxy on %s: %v", p.addr, err)
}

// dialer sends every connection of a client to the proxy, whatever
// address the broker advertises.
func (p *proxy) dialer() kgo.Opt {
	return kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, p.addr)
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
	px := newProxy(t, brokers[0])
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
		SourceClientOpts(px.dialer()), SourceLogger(log), SourceConnectTimeout(connTimeout))
	if err != nil {
		t.Fatal(err)
	}
	snk, err := NewSink(brokers, JSONSerializer[doc](), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix(uniqueName("outage")), SinkClientOpts(px.dialer()), SinkLogger(log),
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
	px.cut()
	waitLog(t, &logs, "cannot reach broker", 30*time.Second)
	produce(half) // written directly: only the job's clients are cut off
	waitLog(t, &logs, "still unreachable", 30*time.Second)
	if long {
		waitLog(t, &logs, "brokers unreachable", 30*time.Second)
	}
	px.restore()
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
