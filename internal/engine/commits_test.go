package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
)

type nopGlobal struct{}

func (nopGlobal) CommitGlobal(context.Context, int64, [][]byte) error { return nil }
func (nopGlobal) Close() error                                        { return nil }

// TestSinkCommits drives the sink-commit part through scripted message
// sequences. Each step is a message (or a question) and the expected
// decision: which global commit starts, if any.
func TestSinkCommits(t *testing.T) {
	type step struct {
		op      string  // committed, done, restarted, doneUpTo
		subtask int     // committed, restarted
		upTo    int64   // committed, done, restarted, doneUpTo
		items   []int64 // committed: checkpoints of the committables
		err     error   // done
		// Expectations.
		start   int64   // upTo of the global commit started, 0 for none
		batch   []int64 // its committables' checkpoints
		wantErr bool    // done fails the job
		want    bool    // doneUpTo's answer
		state   []int64 // if non-nil: checkpoints in the global state after the step
	}
	cases := []struct {
		name     string
		global   bool
		subtasks int
		restored int64
		steps    []step
	}{
		{name: "no global committer: done when every subtask committed", subtasks: 2, steps: []step{
			{op: "committed", subtask: 0, upTo: 1, items: []int64{1}},
			{op: "doneUpTo", upTo: 1, want: false},
			{op: "committed", subtask: 1, upTo: 1},
			{op: "doneUpTo", upTo: 1, want: true},
			{op: "doneUpTo", upTo: 2, want: false},
		}},
		{name: "global commit starts once all subtasks committed", global: true, subtasks: 2, steps: []step{
			{op: "committed", subtask: 0, upTo: 1, items: []int64{1}, state: []int64{1}},
			{op: "committed", subtask: 1, upTo: 1, items: []int64{1}, start: 1, batch: []int64{1, 1}, state: []int64{1, 1}},
			{op: "doneUpTo", upTo: 1, want: false},
			{op: "done", upTo: 1, state: []int64{}},
			{op: "doneUpTo", upTo: 1, want: true},
		}},
		{name: "one global commit at a time; later checkpoints wait", global: true, subtasks: 1, steps: []step{
			{op: "committed", upTo: 1, items: []int64{1}, start: 1, batch: []int64{1}},
			{op: "committed", upTo: 2, items: []int64{2}, state: []int64{1, 2}},
			{op: "committed", upTo: 3, items: []int64{3}},
			{op: "done", upTo: 1, start: 3, batch: []int64{2, 3}},
			{op: "done", upTo: 3, state: []int64{}},
			{op: "doneUpTo", upTo: 3, want: true},
		}},
		{name: "committables of a later checkpoint stay for the next commit", global: true, subtasks: 2, steps: []step{
			{op: "committed", subtask: 0, upTo: 2, items: []int64{1, 2}},
			{op: "committed", subtask: 1, upTo: 1, items: []int64{1}, start: 1, batch: []int64{1, 1}, state: []int64{1, 1, 2}},
			{op: "done", upTo: 1, state: []int64{2}},
			{op: "committed", subtask: 1, upTo: 2, items: []int64{2}, start: 2, batch: []int64{2, 2}},
		}},
		{name: "a failed global commit fails the job and keeps its batch", global: true, subtasks: 1, steps: []step{
			{op: "committed", upTo: 1, items: []int64{1}, start: 1, batch: []int64{1}},
			{op: "done", upTo: 1, err: errors.New("boom"), wantErr: true, state: []int64{1}},
			{op: "doneUpTo", upTo: 1, want: false},
		}},
		{name: "a restore re-runs the restored checkpoint's global commit", global: true, subtasks: 1, restored: 5, steps: []step{
			{op: "doneUpTo", upTo: 5, want: false},
			{op: "committed", upTo: 5, start: 5, batch: []int64{}},
			{op: "done", upTo: 5},
			{op: "doneUpTo", upTo: 5, want: true},
		}},
		{name: "a regionally restarted subtask holds back the global commit", global: true, subtasks: 2, steps: []step{
			{op: "committed", subtask: 0, upTo: 3, items: []int64{3}},
			{op: "restarted", subtask: 1, upTo: 2},
			{op: "committed", subtask: 1, upTo: 2, items: []int64{2}, start: 2, batch: []int64{2}},
			{op: "done", upTo: 2},
			{op: "committed", subtask: 1, upTo: 3, start: 3, batch: []int64{3}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &Node{name: "snk", kind: kindSink}
			st := &sinkTrack{node: node, upTo: make([]int64, tc.subtasks), globalDone: tc.restored}
			if tc.restored > 0 {
				st.globalDone = tc.restored - 1
				for i := range st.upTo {
					st.upTo[i] = tc.restored - 1
				}
			}
			if tc.global {
				st.gc = nopGlobal{}
			}
			c := newSinkCommits()
			c.add("snk", st)
			var pcs = func(cps []int64) []pendingCommittable {
				var out []pendingCommittable
				for _, cp := range cps {
					out = append(out, pendingCommittable{checkpoint: cp, data: []byte(fmt.Sprint(cp))})
				}
				return out
			}
			for i, s := range tc.steps {
				var gc *globalCommit
				var err error
				switch s.op {
				case "committed":
					gc = c.committed("snk", s.subtask, s.upTo, pcs(s.items))
				case "done":
					gc, err = c.globalDone("snk", s.upTo, s.err)
				case "restarted":
					c.restarted("snk", s.subtask, s.upTo)
				case "doneUpTo":
					if got := c.doneUpTo(s.upTo); got != s.want {
						t.Fatalf("step %d: doneUpTo(%d) = %v, want %v", i, s.upTo, got, s.want)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
				if (err != nil) != s.wantErr {
					t.Fatalf("step %d (%s): err = %v, want error %v", i, s.op, err, s.wantErr)
				}
				switch {
				case gc == nil && s.start != 0:
					t.Fatalf("step %d (%s): no global commit started, want one up to %d", i, s.op, s.start)
				case gc != nil && gc.upTo != s.start:
					t.Fatalf("step %d (%s): global commit up to %d started, want %d", i, s.op, gc.upTo, s.start)
				case gc != nil:
					var got []int64
					for _, b := range gc.batch {
						var cp int64
						fmt.Sscan(string(b), &cp)
						got = append(got, cp)
					}
					if !slices.Equal(got, s.batch) && (len(got) > 0 || len(s.batch) > 0) {
						t.Fatalf("step %d (%s): batch of checkpoints %v, want %v", i, s.op, got, s.batch)
					}
				}
				if s.state != nil {
					var got []int64
					for _, ts := range c.globalStates() {
						items, err := decodeCommittables(ts.Parts[partCommittables])
						if err != nil {
							t.Fatal(err)
						}
						for _, it := range items {
							got = append(got, it.checkpoint)
						}
					}
					if !slices.Equal(got, s.state) && (len(got) > 0 || len(s.state) > 0) {
						t.Fatalf("step %d (%s): global state holds checkpoints %v, want %v", i, s.op, got, s.state)
					}
				}
			}
		})
	}
}
