package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// TestTracker drives the checkpoint tracker through scripted
// interleavings. Each step is an input and the expected effect.
func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	a, b := taskKey{"src", 0}, taskKey{"sink", 0}
	type step struct {
		op      string // trigger, ack, expire, fail, complete, can
		now     int
		id      int64
		task    taskKey
		final   bool
		wantErr error // for can/trigger/ack
		done    bool  // ack completes the checkpoint
		fatal   bool  // fail ends the job
		expired bool  // expire finds the pending checkpoint late
	}
	cases := []struct {
		name      string
		tolerable int
		minPause  int
		steps     []step
	}{
		{"acks complete in any order", 0, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "can", now: 1, wantErr: errInProgress},
			{op: "ack", id: 1, task: b},
			{op: "ack", id: 1, task: a, done: true},
			{op: "complete", now: 5, id: 1},
			{op: "can", now: 6},
			{op: "trigger", now: 6, id: 2},
		}},
		{"duplicate and stale acks", 0, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "ack", id: 1, task: a},
			{op: "ack", id: 1, task: a, wantErr: errAny},
			{op: "ack", id: 7, task: b}, // not pending: ignored
			{op: "ack", id: 1, task: b, done: true},
			{op: "ack", id: 1, task: b}, // persisting: ignored
		}},
		{"timeout fails the job without tolerance", 0, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "expire", now: 50},
			{op: "expire", now: 100, expired: true},
			{op: "fail", now: 100, id: 1, fatal: true},
		}},
		{"tolerated failures reset on success", 1, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "fail", now: 100, id: 1},
			{op: "trigger", now: 100, id: 2},
			{op: "ack", id: 2, task: a},
			{op: "ack", id: 2, task: b, done: true},
			{op: "complete", now: 110, id: 2},
			{op: "trigger", now: 120, id: 3},
			{op: "fail", now: 130, id: 3},
			{op: "trigger", now: 140, id: 4},
			{op: "fail", now: 150, id: 4, fatal: true},
		}},
		{"minimum pause", 0, 30, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "ack", id: 1, task: a},
			{op: "ack", id: 1, task: b, done: true},
			{op: "complete", now: 10, id: 1},
			{op: "can", now: 20, wantErr: errTooSoon},
			{op: "can", now: 40},
		}},
		{"a checkpoint being stored does not expire", 0, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "ack", id: 1, task: a},
			{op: "ack", id: 1, task: b, done: true},
			{op: "expire", now: 500},
			{op: "complete", now: 600, id: 1},
			{op: "can", now: 601},
		}},
		{"late ack after abort is ignored", 5, 0, []step{
			{op: "trigger", now: 0, id: 1},
			{op: "fail", now: 10, id: 1},
			{op: "ack", id: 1, task: a},
			{op: "trigger", now: 20, id: 2},
			{op: "ack", id: 2, task: a},
			{op: "ack", id: 2, task: b, done: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := newTracker([]taskKey{a, b}, 1, 100*time.Millisecond, time.Duration(c.minPause)*time.Millisecond, c.tolerable)
			for i, s := range c.steps {
				switch s.op {
				case "can":
					if err := tr.canTrigger(at(s.now)); !errors.Is(err, s.wantErr) {
						t.Fatalf("step %d: canTrigger = %v, want %v", i, err, s.wantErr)
					}
				case "trigger":
					if err := tr.canTrigger(at(s.now)); err != nil {
						t.Fatalf("step %d: canTrigger = %v", i, err)
					}
					if p := tr.begin(at(s.now), s.final, nil); p.id != s.id {
						t.Fatalf("step %d: began checkpoint %d, want %d", i, p.id, s.id)
					}
				case "ack":
					p, err := tr.ack(s.id, s.task, []checkpoint.TaskState{{Vertex: s.task.vertex}})
					if (err != nil) != (s.wantErr != nil) {
						t.Fatalf("step %d: ack error %v, want error: %v", i, err, s.wantErr != nil)
					}
					if (p != nil) != s.done {
						t.Fatalf("step %d: ack completed = %v, want %v", i, p != nil, s.done)
					}
					if p != nil && len(p.states) != 2 {
						t.Fatalf("step %d: completed with %d states, want 2", i, len(p.states))
					}
				case "expire":
					if p := tr.expired(at(s.now)); (p != nil) != s.expired {
						t.Fatalf("step %d: expired = %v, want %v", i, p != nil, s.expired)
					}
				case "fail":
					if fatal := tr.fail(s.id, at(s.now)); fatal != s.fatal {
						t.Fatalf("step %d: fail fatal = %v, want %v", i, fatal, s.fatal)
					}
				case "complete":
					tr.complete(s.id, at(s.now))
				}
			}
		})
	}
}

// errAny marks a step that expects some error.
var errAny = errors.New("any error")
