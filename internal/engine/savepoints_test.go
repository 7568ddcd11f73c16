package engine

import (
	"errors"
	"testing"
)

// TestSavepointsPart drives the savepoint part through scripted request
// and checkpoint sequences. Each step is an input and the expected
// decision.
func TestSavepointsPart(t *testing.T) {
	type step struct {
		op        string // request, stopRequest, stop, next, final, saved, failed, drop
		req       string // the request's name (request, stopRequest)
		finishing bool   // request
		canStart  bool   // next
		id        int64  // next, final, saved, failed
		// Expectations.
		refused  error  // request: answered right away with this (errors.Is), or nil
		refusedS bool   // request: answered right away with some error
		got      string // next/saved/failed: the request returned ("" for none)
		dropped  int    // drop: how many requests are answered
		stopping bool   // after the step
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"an intermediate savepoint waits for a free slot", []step{
			{op: "request", req: "a"},
			{op: "next", canStart: false, id: 3},
			{op: "next", canStart: true, id: 3, got: "a"},
			{op: "next", canStart: true, id: 4},
			{op: "saved", id: 3, got: "a"},
			{op: "saved", id: 3}, // answered once only
		}},
		{"savepoints are taken in request order", []step{
			{op: "request", req: "a"},
			{op: "request", req: "b"},
			{op: "next", canStart: true, id: 1, got: "a"},
			{op: "failed", id: 1, got: "a"},
			{op: "next", canStart: true, id: 2, got: "b"},
		}},
		{"a plain checkpoint is no savepoint", []step{
			{op: "request", req: "a"},
			{op: "saved", id: 1},
			{op: "failed", id: 1},
			{op: "next", canStart: true, id: 2, got: "a"},
			{op: "failed", id: 1},
			{op: "failed", id: 2, got: "a"},
		}},
		{"a finishing job refuses savepoints", []step{
			{op: "request", req: "a", finishing: true, refused: ErrNotRunning},
			{op: "stopRequest", req: "s", finishing: true, refused: ErrNotRunning},
			{op: "next", canStart: true, id: 1},
		}},
		{"stop with savepoint becomes the final checkpoint", []step{
			{op: "stopRequest", req: "s", stopping: true},
			{op: "stopRequest", req: "t", refusedS: true, stopping: true},
			{op: "final", id: 7, stopping: true},
			{op: "saved", id: 7, got: "s", stopping: true},
		}},
		{"a failed stop with savepoint runs on", []step{
			{op: "stopRequest", req: "s", stopping: true},
			{op: "final", id: 7, stopping: true},
			{op: "failed", id: 7, got: "s", stopping: false},
			{op: "stopRequest", req: "t", stopping: true},
		}},
		{"a failed stop with savepoint still stops after Stop", []step{
			{op: "stopRequest", req: "s", stopping: true},
			{op: "stop", stopping: true},
			{op: "final", id: 7, stopping: true},
			{op: "failed", id: 7, got: "s", stopping: true},
		}},
		{"no intermediate savepoint while stopping", []step{
			{op: "request", req: "a"},
			{op: "stop", stopping: true},
			{op: "next", canStart: true, id: 1, stopping: true},
			{op: "drop", dropped: 1, stopping: true},
		}},
		{"the end answers every waiting request", []step{
			{op: "request", req: "a"},
			{op: "request", req: "b"},
			{op: "next", canStart: true, id: 1, got: "a"},
			{op: "stopRequest", req: "s", stopping: true},
			{op: "drop", dropped: 3, stopping: true},
			{op: "drop", dropped: 2, stopping: true}, // the queue is emptied; current and stop are not
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s savepoints
			names := map[*savepointReq]string{}
			name := func(r *savepointReq) string { return names[r] }
			for i, st := range tc.steps {
				var got *savepointReq
				switch st.op {
				case "request", "stopRequest":
					r := &savepointReq{dir: st.req, stop: st.op == "stopRequest", reply: make(chan savepointReply, 1)}
					names[r] = st.req
					err := s.request(r, st.finishing)
					if st.refused != nil && !errors.Is(err, st.refused) || st.refused == nil && !st.refusedS && err != nil || st.refusedS && err == nil {
						t.Fatalf("step %d: request %s: err = %v, want %v (some: %v)", i, st.req, err, st.refused, st.refusedS)
					}
				case "stop":
					s.stop()
				case "next":
					got = s.next(st.canStart, st.id)
				case "final":
					s.final(st.id)
				case "saved":
					got = s.saved(st.id)
				case "failed":
					got = s.failed(st.id)
				case "drop":
					if n := len(s.drop()); n != st.dropped {
						t.Fatalf("step %d: drop answered %d requests, want %d", i, n, st.dropped)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, st.op)
				}
				if name(got) != st.got {
					t.Fatalf("step %d (%s %d): got request %q, want %q", i, st.op, st.id, name(got), st.got)
				}
				if s.stopping != st.stopping {
					t.Fatalf("step %d (%s): stopping = %v, want %v", i, st.op, s.stopping, st.stopping)
				}
			}
		})
	}
}
