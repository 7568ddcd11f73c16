package engine

import (
	"fmt"
	"slices"
	"testing"
)

// TestFailoverPart drives the failover part through scripted sequences of
// task failures, checkpoints and split assignments. Each step is an input
// and the expected decision.
func TestFailoverPart(t *testing.T) {
	// Two regions of two subtasks each (src[i] -> snk[i] over forward
	// edges), and a region spanning the whole job.
	two := [][]taskKey{{{"src", 0}, {"snk", 0}}, {{"src", 1}, {"snk", 1}}}
	one := [][]taskKey{{{"src", 0}, {"snk", 0}, {"src", 1}, {"snk", 1}}}
	s0, s1, k0 := taskKey{"src", 0}, taskKey{"src", 1}, taskKey{"snk", 0}
	type step struct {
		op      string  // fail, ready, up, finish, checkpoint, complete, assign, handBack
		task    taskKey // fail, finish, assign, handBack
		region  int     // ready, up
		id      int64   // checkpoint, complete, handBack (the restore checkpoint)
		done    bool    // fail: the attempt is done
		pending bool    // toRestart is asked with a checkpoint pending
		splits  string  // assign
		// Expectations.
		regional bool     // fail: restart only the region
		back     []string // handBack
		restart  []int    // the regions to restart after the step
		down     bool     // anyDown after the step
		all      bool     // allFinished after the step
	}
	cases := []struct {
		name    string
		mode    Failover
		regions [][]taskKey
		steps   []step
	}{
		{"a failure restarts its region once ready and no checkpoint is pending", FailoverRegion, two, []step{
			{op: "fail", task: s1, regional: true, down: true},
			{op: "ready", region: 1, pending: true, down: true},
			{op: "ready", region: 1, restart: []int{1}, down: true},
			{op: "up", region: 1},
		}},
		{"full failover never restarts a region", FailoverFull, two, []step{
			{op: "fail", task: s1, regional: false},
		}},
		{"a region spanning the job fails the attempt", FailoverRegion, one, []step{
			{op: "fail", task: k0, regional: false},
		}},
		{"a failure after the attempt is done fails it", FailoverRegion, two, []step{
			{op: "fail", task: s0, done: true, regional: false},
		}},
		{"a restarted region's subtasks are no longer finished", FailoverRegion, two, []step{
			{op: "finish", task: s0},
			{op: "finish", task: k0},
			{op: "finish", task: s1},
			{op: "finish", task: taskKey{"snk", 1}, all: true},
			{op: "fail", task: k0, regional: true, down: true},
			{op: "finish", task: s0, down: true}, // stale: the old task's generation
		}},
		{"splits assigned after the restore checkpoint's snapshot go back", FailoverRegion, two, []step{
			{op: "assign", task: s0, splits: "a"},
			{op: "checkpoint", id: 1},
			{op: "assign", task: s0, splits: "b"},
			{op: "checkpoint", id: 2},
			{op: "assign", task: s0, splits: "c"},
			{op: "complete", id: 1},
			{op: "handBack", task: s0, id: 1, back: []string{"b", "c"}},
			{op: "handBack", task: s0, id: 1, back: nil},
		}},
		{"a completed checkpoint covers earlier assignments", FailoverRegion, two, []step{
			{op: "assign", task: s0, splits: "a"},
			{op: "checkpoint", id: 1},
			{op: "assign", task: s0, splits: "b"},
			{op: "complete", id: 1},
			{op: "checkpoint", id: 2},
			{op: "complete", id: 2},
			{op: "handBack", task: s0, id: 2, back: nil},
		}},
		{"full failover remembers no assignments", FailoverFull, two, []step{
			{op: "checkpoint", id: 1},
			{op: "assign", task: s0, splits: "a"},
			{op: "handBack", task: s0, id: 0, back: nil},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			of := map[taskKey]int{}
			for r, keys := range tc.regions {
				for _, k := range keys {
					of[k] = r
				}
			}
			f := newFailover(tc.mode, tc.regions, of, 0)
			for i, s := range tc.steps {
				switch s.op {
				case "fail":
					r, regional := f.regionToRestart(s.task, s.done)
					if regional != s.regional {
						t.Fatalf("step %d: regional = %v, want %v", i, regional, s.regional)
					}
					if regional {
						old := f.gen(s.task)
						f.regionDown(r)
						if !f.stale(sender{vertex: s.task.vertex, subtask: s.task.subtask, gen: old}) {
							t.Fatalf("step %d: a message of the failed task's generation is not stale", i)
						}
					}
				case "ready":
					f.regionReady(s.region)
				case "up":
					f.regionUp(s.region)
				case "finish":
					// As the coordinator does: only a current task's message counts.
					if snd := (sender{vertex: s.task.vertex, subtask: s.task.subtask, gen: 0}); !f.stale(snd) {
						f.taskFinished(s.task)
					}
				case "checkpoint":
					f.checkpointBegins(s.id)
				case "complete":
					f.checkpointComplete(s.id)
				case "assign":
					f.assign(s.task, s.splits)
				case "handBack":
					var got []string
					for _, sp := range f.handBack(s.task, s.id) {
						got = append(got, fmt.Sprint(sp))
					}
					if !slices.Equal(got, s.back) {
						t.Fatalf("step %d: handed back %v, want %v", i, got, s.back)
					}
				default:
					t.Fatalf("step %d: unknown op %q", i, s.op)
				}
				if got := f.toRestart(s.pending); !slices.Equal(got, s.restart) {
					t.Fatalf("step %d (%s): regions to restart %v, want %v", i, s.op, got, s.restart)
				}
				if f.anyDown() != s.down {
					t.Fatalf("step %d (%s): anyDown = %v, want %v", i, s.op, f.anyDown(), s.down)
				}
				if f.allFinished() != s.all {
					t.Fatalf("step %d (%s): allFinished = %v, want %v", i, s.op, f.allFinished(), s.all)
				}
			}
		})
	}
}
