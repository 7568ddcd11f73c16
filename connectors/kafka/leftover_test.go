package kafka

import (
	"fmt"
	"testing"
)

// TestLeftoversRuleUnchanged checks that the sink/leftover request the
// writer builds fences exactly the listed ids the hand-written rule it
// replaced fenced (own slots and old states' slots, then listed ids of
// subtasks at or above max(restored parallelism, parallelism) with
// j % parallelism == subtask, or on a fresh start every j % parallelism ==
// subtask), for fresh starts, same-parallelism restores, scale-down and
// scale-up, with states spread over the new writers in every rotation —
// but one: a writer that got states and whose own subtask is at or above
// the restored parallelism (no state of it exists) now fences its own ids
// as well. The old rule left them to the writer's producers, which fence
// them when they first begin a transaction; under sink/leftover every
// leftover id has exactly one writer that aborts it at the start.
func TestLeftoversRuleUnchanged(t *testing.T) {
	const prefix = "sluice-0a1b-kafka"
	old := func(sub, par int, states []writerState, restored bool, j int) bool {
		groups := map[int]bool{}
		oldPar := 0
		for _, st := range states {
			groups[st.Subtask] = true
			oldPar = max(oldPar, st.Parallelism)
		}
		if !restored || len(states) == 0 {
			groups[sub] = true
		}
		lim := max(oldPar, par)
		return groups[j] || (j >= lim && j%par == sub) || (!restored && j%par == sub)
	}
	check := func(t *testing.T, sub, par int, states []writerState, restored bool) {
		w := &writer[string]{subtask: sub, par: par, prefix: prefix}
		oldPar := 0
		for _, st := range states {
			oldPar = max(oldPar, st.Parallelism)
		}
		req := w.leftovers(states, restored, oldPar)
		var ids []string
		for j := range 12 {
			for k := range 3 {
				ids = append(ids, txnID(prefix, j, k))
			}
		}
		ids = append(ids, "sluice-0a1b-kafka2-0-0", "other-0-0", prefix+"-0-x")
		req.Existing = ids
		for _, id := range ids {
			j, k, ok := parseTxnID(prefix, id)
			want := ok && (old(sub, par, states, restored, j) || (restored && len(states) > 0 && j == sub && sub >= oldPar))
			if got := ok && req.Owns(j, int64(k)); got != want {
				t.Errorf("subtask %d/%d, states %v, restored %v: owns %s = %v, the old rule said %v", sub, par, states, restored, id, got, want)
			}
		}
	}
	for par := 1; par <= 5; par++ {
		for sub := range par {
			check(t, sub, par, nil, false)
		}
		for prev := 1; prev <= 5; prev++ {
			for shift := range par {
				t.Run(fmt.Sprintf("%d→%d/shift%d", prev, par, shift), func(t *testing.T) {
					got := make([][]writerState, par)
					for j := range prev {
						w := (j + shift) % par
						got[w] = append(got[w], writerState{Subtask: j, Parallelism: prev})
					}
					for sub := range par {
						check(t, sub, par, got[sub], true)
					}
				})
			}
		}
	}
}
