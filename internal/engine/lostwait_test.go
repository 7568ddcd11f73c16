package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// msgLog is a slog handler that keeps the messages it is given.
type msgLog struct {
	mu   sync.Mutex
	msgs []string
}

func (l *msgLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *msgLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, r.Message)
	return nil
}
func (l *msgLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *msgLog) WithGroup(string) slog.Handler      { return l }

// count returns how many messages start with prefix.
func (l *msgLog) count(prefix string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, m := range l.msgs {
		if strings.HasPrefix(m, prefix) {
			n++
		}
	}
	return n
}

// comingHosts is a Placement of the coordinator's process, a loopback host
// that the test cuts (a node that died) and a second loopback host that
// links only once the test adds it (the node coming back).
type comingHosts struct {
	lost, back *engine.Loopback
	added      atomic.Bool
}

func (p *comingHosts) Hosts() []engine.TaskHost {
	if p.added.Load() {
		return []engine.TaskHost{engine.Local, p.lost, p.back}
	}
	return []engine.TaskHost{engine.Local, p.lost}
}

// TestLostHostWait: a job of four regions on the coordinator's process and
// a loopback host; the loopback's link is cut once checkpoints completed.
// With Config.LostHostWait the lost host's regions do not restart on the
// host that remains: they wait (the coordinator logs it for each) until a
// new host links, and restart there (it gets a deployment; moves are off,
// so nothing else could put work on it). With a short wait and no host
// coming, they restart on the remaining host after it. Either way the
// output equals the input.
func TestLostHostWait(t *testing.T) {
	for _, comes := range []bool{true, false} {
		t.Run(fmt.Sprintf("host comes=%v", comes), func(t *testing.T) { lostHostWaitRun(t, comes) })
	}
}

func lostHostWaitRun(t *testing.T, comes bool) {
	const parallelism = 4
	splits, src, cut := halfHeld(parallelism)
	store := testsink.NewStore[rec]()
	logs := &msgLog{}
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.FixedDelay(4, 0)), stream.Logger(slog.New(logs)))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "script"), testsink.NewTwoPhase(store), "sink")
	j, err := env.Build("lost-host-wait")
	if err != nil {
		t.Fatal(err)
	}
	pl := &comingHosts{lost: engine.NewLoopback("lost", engine.DiscardLogger()), back: engine.NewLoopback("back", engine.DiscardLogger())}
	t.Cleanup(func() {
		if err := pl.back.Close(); err != nil {
			t.Errorf("loopback host: %v", err)
		}
		_ = pl.lost.Close()
	})
	engine.SetPlacement(j, pl, faultinject.ErrInjected)
	engine.SetMoveInterval(j, -1)
	wait := time.Minute
	if !comes {
		wait = 200 * time.Millisecond
	}
	engine.SetLostHostWait(j, wait)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h := j.Start(ctx)
	waitCheckpoints(t, h, 3)
	pl.lost.Cut()
	const waits = "region waits for a task host"
	if comes {
		// Both lost regions wait before the new host links.
		for i := 0; logs.count(waits) < 2; i++ {
			if i > 30000 { // a hang guard
				t.Fatalf("%d regions logged that they wait for a host within 60s, want 2", logs.count(waits))
			}
			time.Sleep(2 * time.Millisecond)
		}
		if got := pl.back.Deployed(); got != 0 {
			t.Fatalf("%d deployments on the new host before it linked", got)
		}
		pl.added.Store(true)
	}
	close(cut)
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	lost := 0
	for _, f := range res.Failures {
		if !errors.Is(f, engine.ErrHostLost) {
			t.Errorf("restart caused by %v, not by the lost host", f)
		}
		lost++
	}
	if lost != 2 {
		t.Errorf("%d restarts for the lost host, want 2 (its two regions): %v", lost, res.Failures)
	}
	if got := logs.count(waits); got != 2 {
		t.Errorf("%d regions waited for a host, want 2", got)
	}
	if comes {
		if got := pl.back.Deployed(); got == 0 {
			t.Errorf("no region restarted on the host that linked during the wait")
		}
	} else if got := logs.count("no task host linked within the lost host wait"); got != 2 {
		t.Errorf("%d regions restarted after the wait ran out, want 2", got)
	}
	expectExactlyOnce(t, splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}
