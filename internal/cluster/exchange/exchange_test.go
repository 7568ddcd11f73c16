package exchange_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

// describe renders a message for comparison.
func describe(m exchange.Message[uint64]) string {
	switch m.Kind {
	case exchange.KindRecords:
		var b strings.Builder
		b.WriteString("R")
		for _, v := range m.Records {
			fmt.Fprintf(&b, ":%d", v)
		}
		return b.String()
	case exchange.KindWatermark, exchange.KindBarrier:
		return fmt.Sprintf("%v:%d", m.Kind, m.Value)
	}
	return m.Kind.String()
}

// collapse keeps only the last of consecutive watermarks (a sender may
// coalesce them).
func collapse(in []string) []string {
	var out []string
	for i, s := range in {
		if strings.HasPrefix(s, "watermark:") && i+1 < len(in) && strings.HasPrefix(in[i+1], "watermark:") {
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestOrder sends thousands of batches and events through a channel with
// few credits and a consumer that lags, and checks that everything arrives
// once and in order, events in line with records.
func TestOrder(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, u64Codec{}, []exchange.Option{exchange.WithCredits(2)}, []exchange.Option{exchange.WithSendQueue(1)})
	defer r.Close()

	rng := rand.New(rand.NewPCG(1, 2))
	var want []string
	type op struct {
		recs []uint64
		ev   exchange.Event
	}
	var ops []op
	next, wm, cp := uint64(0), int64(0), int64(0)
	for range 3000 {
		switch k := rng.IntN(10); {
		case k < 6:
			recs := make([]uint64, 1+rng.IntN(40))
			for i := range recs {
				recs[i] = next
				next++
			}
			ops = append(ops, op{recs: recs})
			want = append(want, describe(exchange.Message[uint64]{Kind: exchange.KindRecords, Records: recs}))
		case k < 8:
			wm += int64(rng.IntN(100))
			ops = append(ops, op{ev: exchange.Watermark(wm)})
		case k < 9:
			cp++
			ops = append(ops, op{ev: exchange.Barrier(cp)})
		default:
			ops = append(ops, op{ev: exchange.Idle()})
		}
		if ev := ops[len(ops)-1].ev; ev.Kind != 0 {
			want = append(want, describe(exchange.Message[uint64]{Kind: ev.Kind, Value: ev.Value}))
		}
	}
	ops = append(ops, op{ev: exchange.EndOfPartition()}, op{ev: exchange.Barrier(cp + 1)})
	want = append(want, "end", fmt.Sprintf("barrier:%d", cp+1))

	ctx := t.Context()
	sendErr := make(chan error, 1)
	go func() {
		for _, o := range ops {
			var err error
			if o.recs != nil {
				err = s.SendBatch(ctx, o.recs)
			} else {
				err = s.SendEvent(ctx, o.ev)
			}
			if err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- s.Close(ctx)
	}()

	var got []string
	for i := 0; ; i++ {
		if i%7 == 0 {
			runtime.Gosched() // let the sender fill the credits
		}
		m, err := r.Next(ctx)
		if errors.Is(err, exchange.ErrEndOfStream) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, describe(m))
	}
	if err := <-sendErr; err != nil {
		t.Fatalf("sender: %v", err)
	}
	gotC, wantC := collapse(got), collapse(want)
	if len(gotC) != len(wantC) {
		t.Fatalf("got %d messages (collapsed), want %d", len(gotC), len(wantC))
	}
	for i := range wantC {
		if gotC[i] != wantC[i] {
			t.Fatalf("message %d: got %.60s, want %.60s", i, gotC[i], wantC[i])
		}
	}
	rs, ss := r.Stats(), s.Stats()
	if rs.RecordsReceived != int64(next) || ss.RecordsSent != int64(next) {
		t.Errorf("records: received %d, sent %d, want %d", rs.RecordsReceived, ss.RecordsSent, next)
	}
	if rs.FramesReceived != ss.FramesSent {
		t.Errorf("frames: received %d, sent %d", rs.FramesReceived, ss.FramesSent)
	}
	t.Logf("%d messages (%d after collapsing watermarks), %d frames, %d credits", len(got), len(gotC), rs.FramesReceived, rs.CreditsGranted)
}

// TestBackpressure stalls the consumer: the sender must stop after the
// receiver's credits and its own send queue are full, with exactly that
// many frames held on each side, and resume when the consumer polls.
func TestBackpressure(t *testing.T) {
	const credits, queue, batches, size = 3, 2, 40, 100
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, u64Codec{}, []exchange.Option{exchange.WithCredits(credits)}, []exchange.Option{exchange.WithSendQueue(queue)})
	defer r.Close()
	ctx := t.Context()
	batch := func(b int) []uint64 {
		recs := make([]uint64, size)
		for i := range recs {
			recs[i] = uint64(b*size + i)
		}
		return recs
	}

	// With the consumer stalled, credits+queue batches are accepted...
	for b := range credits + queue {
		if err := s.SendBatch(ctx, batch(b)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the sender to spend its credits", func() bool {
		ss, rs := s.Stats(), r.Stats()
		return ss.Credits == 0 && ss.Queued == queue && rs.Queued == credits
	})
	// ...and the next one blocks until its context ends.
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := s.SendBatch(short, batch(credits+queue))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SendBatch with no credit and a full queue: got %v, want a deadline error", err)
	}
	ss, rs := s.Stats(), r.Stats()
	if ss.FramesSent != credits || rs.FramesReceived != credits || rs.CreditsGranted != credits || ss.CreditsReceived != credits || ss.Queued != queue {
		t.Errorf("stalled: sender sent %d frames with %d credits, %d queued; receiver got %d and granted %d; want %d each, %d queued",
			ss.FramesSent, ss.CreditsReceived, ss.Queued, rs.FramesReceived, rs.CreditsGranted, credits, queue)
	}
	// An event does not block: it rides on the last queued frame.
	if err := s.SendEvent(ctx, exchange.Barrier(7)); err != nil {
		t.Fatal(err)
	}
	if ss := s.Stats(); ss.PendingEvents != 1 || ss.Queued != queue {
		t.Errorf("after a barrier: %d events in %d queued frames, want 1 in %d", ss.PendingEvents, ss.Queued, queue)
	}

	// Drain on another goroutine while the rest is sent: everything arrives
	// once, in order, the barrier right after the batches before it, and
	// the receiver never holds more than its credits.
	type result struct {
		n         uint64
		barrierAt uint64
		err       error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		for {
			if q := r.Stats().Queued; q > credits {
				res.err = fmt.Errorf("receiver holds %d frames, more than its %d credits", q, credits)
				break
			}
			m, err := r.Next(ctx)
			if errors.Is(err, exchange.ErrEndOfStream) {
				break
			}
			if err != nil {
				res.err = err
				break
			}
			if m.Kind == exchange.KindBarrier {
				res.barrierAt = res.n
			}
			for _, v := range m.Records {
				if v != res.n {
					res.err = fmt.Errorf("record %d: got %d", res.n, v)
					done <- res
					return
				}
				res.n++
			}
		}
		done <- res
	}()
	for b := credits + queue; b < batches; b++ {
		if err := s.SendBatch(ctx, batch(b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	if res.n != batches*size || res.barrierAt != (credits+queue)*size {
		t.Fatalf("got %d records and the barrier after %d, want %d and after %d", res.n, res.barrierAt, batches*size, (credits+queue)*size)
	}
}

// TestSharedReady: a task with two inputs waits on one ready channel and
// polls both; no wake-up is lost.
func TestSharedReady(t *testing.T) {
	const batches = 500
	srv, addr := startServer(t)
	c := dial(t, addr)
	ctx := t.Context()
	ready := make(chan struct{}, 1)
	ep := exchange.Epoch{Attempt: 1}
	var recvs []*exchange.Receiver[uint64]
	sendErr := make(chan error, 2)
	for src := range 2 {
		ch := exchange.ChannelID{Job: "job", Edge: "a->b", Src: src, Dst: 0}
		r, err := exchange.Listen(srv, ch, ep, u64Codec{}, exchange.WithReady(ready), exchange.WithCredits(1))
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		recvs = append(recvs, r)
		s, err := exchange.Open(ctx, c, ch, ep, u64Codec{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for b := range batches {
				if err := s.SendBatch(ctx, []uint64{uint64(b)}); err != nil {
					sendErr <- err
					return
				}
			}
			sendErr <- s.Close(ctx)
		}()
	}
	next, ended := []uint64{0, 0}, []bool{false, false}
	for !ended[0] || !ended[1] {
		found := false
		for i, r := range recvs {
			if ended[i] {
				continue
			}
			m, ok, err := r.Poll()
			switch {
			case errors.Is(err, exchange.ErrEndOfStream):
				ended[i] = true
				if next[i] != batches {
					t.Fatalf("input %d ended after %d batches, want %d", i, next[i], batches)
				}
			case err != nil:
				t.Fatal(err)
			case ok:
				found = true
				if m.Records[0] != next[i] {
					t.Fatalf("input %d: got %d, want %d", i, m.Records[0], next[i])
				}
				next[i]++
			}
		}
		if !found && (!ended[0] || !ended[1]) {
			select {
			case <-ready:
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
	for range 2 {
		if err := <-sendErr; err != nil {
			t.Fatal(err)
		}
	}
}
