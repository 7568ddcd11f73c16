package leftover

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestSchemeRoundTrip(t *testing.T) {
	for _, s := range []Scheme{{}, {Prefix: "sluice-0a1b-sink-"}, {Prefix: ".part-0a1b-", Suffix: ".txt.inprogress"}, {Prefix: "p-", Suffix: "-9"}} {
		for _, c := range []struct {
			sub int
			seq int64
		}{{0, 0}, {3, 17}, {12, 1 << 40}} {
			name := s.Format(c.sub, c.seq)
			sub, seq, ok := s.Parse(name)
			if !ok || sub != c.sub || seq != c.seq {
				t.Errorf("%+v: Parse(Format(%d, %d) = %q) = %d, %d, %v", s, c.sub, c.seq, name, sub, seq, ok)
			}
		}
	}
}

func TestSchemeParseRejects(t *testing.T) {
	s := Scheme{Prefix: ".part-job7-", Suffix: ".txt.inprogress"}
	for _, name := range []string{
		"",
		".part-job7-1-2.txt",                               // no in-progress suffix
		".part-job8-1-2.txt.inprogress",                    // another job
		".part-job7-x-1-2.txt.inprogress",                  // a job whose id extends the prefix
		".part-job7-1-2-3.txt.inprogress",                  // three numbers
		".part-job7-1.txt.inprogress",                      // one number
		".part-job7--1-2.txt.inprogress",                   // a sign
		".part-job7-+1-2.txt.inprogress",                   // a sign
		".part-job7-1-.txt.inprogress",                     // an empty seq
		".part-job7--2.txt.inprogress",                     // an empty subtask
		".part-job7-1-0x2.txt.inprogress",                  // not decimal
		".part-job7-1- 2.txt.inprogress",                   // a space
		".part-job7-1-99999999999999999999.txt.inprogress", // overflows int64
		"part-job7-1-2.txt.inprogress",                     // not hidden
	} {
		if sub, seq, ok := s.Parse(name); ok {
			t.Errorf("Parse(%q) = %d, %d, true; want false", name, sub, seq)
		}
	}
}

// TestAbort is the rule of the package doc, case by case. The names are
// those of a pool of two slots per subtask unless a case lists others.
func TestAbort(t *testing.T) {
	s := Scheme{Prefix: "job-a-"}
	pool := func(subs ...int) []string {
		var out []string
		for _, j := range subs {
			out = append(out, s.Format(j, 0), s.Format(j, 1))
		}
		return out
	}
	cases := []struct {
		name string
		r    Request
		want []string
	}{
		{"fresh start/own subtask only", Request{Subtask: 1, Parallelism: 4, Existing: pool(0, 1, 2, 3)}, pool(1)},
		{"fresh start/higher earlier parallelism maps j%p", Request{Subtask: 1, Parallelism: 2, Existing: pool(0, 1, 2, 3, 4, 5)}, pool(1, 3, 5)},
		{"fresh start/subtask 0 gets 0, 2, 4", Request{Subtask: 0, Parallelism: 2, Existing: pool(0, 1, 2, 3, 4, 5)}, pool(0, 2, 4)},
		{"fresh start/previous parallelism is ignored", Request{Subtask: 0, Parallelism: 2, PreviousParallelism: 6, Existing: pool(0, 1, 2, 3)}, pool(0, 2)},
		{"same parallelism/own state from its seq on",
			Request{Subtask: 1, Parallelism: 2, Restored: true, PreviousParallelism: 2, States: []State{{Subtask: 1, From: 5}},
				Existing: []string{s.Format(1, 3), s.Format(1, 4), s.Format(1, 5), s.Format(1, 9), s.Format(0, 7)}},
			[]string{s.Format(1, 5), s.Format(1, 9)}},
		{"same parallelism/pool from 0", Request{Subtask: 1, Parallelism: 2, Restored: true, PreviousParallelism: 2, States: []State{{Subtask: 1}},
			Existing: pool(0, 1)}, pool(1)},
		{"scale-down/states of 0 and 2 reached writer 1", Request{Subtask: 1, Parallelism: 2, Restored: true, PreviousParallelism: 4,
			States:   []State{{Subtask: 0, From: 3}, {Subtask: 2, From: 1}},
			Existing: []string{s.Format(0, 2), s.Format(0, 3), s.Format(1, 8), s.Format(2, 0), s.Format(2, 1), s.Format(3, 9)}},
			[]string{s.Format(0, 3), s.Format(2, 1)}},
		{"scale-down/writer without the state of its own subtask leaves it to the holder", Request{Subtask: 0, Parallelism: 2, Restored: true, PreviousParallelism: 4,
			States: []State{{Subtask: 1, From: 0}, {Subtask: 3, From: 0}}, Existing: pool(0, 1, 2, 3)}, pool(1, 3)},
		{"scale-down/subtasks beyond the previous parallelism map j%p", Request{Subtask: 1, Parallelism: 2, Restored: true, PreviousParallelism: 4,
			States: []State{{Subtask: 1}}, Existing: pool(0, 1, 2, 3, 4, 5, 6, 7)}, pool(1, 5, 7)},
		{"scale-down/previous parallelism unknown: only the states", Request{Subtask: 1, Parallelism: 2, Restored: true,
			States: []State{{Subtask: 3, From: 1}}, Existing: pool(0, 1, 2, 3, 4, 5)}, []string{s.Format(3, 1)}},
		{"scale-up/new subtask without state: its own and j%p beyond the previous parallelism", Request{Subtask: 3, Parallelism: 4, Restored: true, PreviousParallelism: 2,
			Existing: pool(0, 1, 2, 3, 7, 8)}, pool(3, 7)},
		{"scale-up/old subtask keeps its state", Request{Subtask: 0, Parallelism: 4, Restored: true, PreviousParallelism: 2,
			States: []State{{Subtask: 0, From: 1}}, Existing: pool(0, 1, 2, 3, 4)}, []string{s.Format(0, 1), s.Format(4, 0), s.Format(4, 1)}},
		{"scale-up/no state and previous parallelism unknown: nothing", Request{Subtask: 3, Parallelism: 4, Restored: true, Existing: pool(0, 1, 2, 3, 7)}, nil},
		{"needed names stay", Request{Subtask: 0, Parallelism: 1, Restored: true, PreviousParallelism: 1, States: []State{{Subtask: 0, From: 2}},
			Existing: []string{s.Format(0, 1), s.Format(0, 2), s.Format(0, 3)}, Needed: []string{s.Format(0, 3)}}, []string{s.Format(0, 2)}},
		{"needed names stay on a fresh start", Request{Subtask: 0, Parallelism: 1, Existing: pool(0), Needed: []string{s.Format(0, 0)}}, []string{s.Format(0, 1)}},
		{"foreign prefixes and malformed names are never touched", Request{Subtask: 0, Parallelism: 1,
			Existing: []string{"job-b-0-1", "job-a-x-0-1", "job-a-0-1-2", "job-a-0", "job-a--0-1", "job-a-0-1.tmp", "other", "job-a-0-1"}},
			[]string{"job-a-0-1"}},
		{"listed twice, aborted once", Request{Subtask: 0, Parallelism: 1, Existing: []string{"job-a-0-1", "job-a-0-1"}}, []string{"job-a-0-1"}},
		{"checkpoint ids/scale-down: j%p after the restored checkpoint, states ignored", Request{Subtask: 1, Parallelism: 2, Restored: true, Checkpoint: 7,
			States:   []State{{Subtask: 0}},
			Existing: []string{s.Format(0, 8), s.Format(1, 6), s.Format(1, 7), s.Format(1, 8), s.Format(2, 9), s.Format(3, 8), s.Format(5, 12)}},
			[]string{s.Format(1, 8), s.Format(3, 8), s.Format(5, 12)}},
		{"checkpoint ids/scale-up", Request{Subtask: 3, Parallelism: 4, Restored: true, Checkpoint: 7,
			Existing: []string{s.Format(1, 8), s.Format(3, 7), s.Format(3, 8), s.Format(7, 9)}}, []string{s.Format(3, 8), s.Format(7, 9)}},
		{"checkpoint ids/a committable's name stays", Request{Subtask: 0, Parallelism: 1, Restored: true, Checkpoint: 7,
			Existing: []string{s.Format(0, 8), s.Format(0, 9)}, Needed: []string{s.Format(0, 8)}}, []string{s.Format(0, 9)}},
		{"checkpoint ids/ignored on a fresh start", Request{Subtask: 0, Parallelism: 1, Checkpoint: 7, Existing: pool(0)}, pool(0)},
		{"several states of one old subtask: the highest From", Request{Subtask: 0, Parallelism: 1, Restored: true,
			States: []State{{Subtask: 0, From: 1}, {Subtask: 0, From: 4}}, Existing: []string{s.Format(0, 2), s.Format(0, 4)}}, []string{s.Format(0, 4)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.r.Parser = s
			got, err := Abort(c.r)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Abort = %q, want %q", got, c.want)
			}
		})
	}
}

func TestAbortInvalid(t *testing.T) {
	s := Scheme{}
	for _, r := range []Request{
		{Subtask: 0, Parallelism: 1},
		{Parser: s, Subtask: 0, Parallelism: 0},
		{Parser: s, Subtask: 2, Parallelism: 2},
		{Parser: s, Subtask: -1, Parallelism: 2},
		{Parser: s, Subtask: 0, Parallelism: 2, PreviousParallelism: -1},
		{Parser: s, Subtask: 0, Parallelism: 2, States: []State{{Subtask: -1}}},
		{Parser: s, Subtask: 0, Parallelism: 2, States: []State{{Subtask: 0, From: -1}}},
		{Parser: s, Subtask: 0, Parallelism: 2, Checkpoint: -1},
	} {
		if _, err := Abort(r); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("Abort(%+v) = %v, want ErrInvalidRequest", r, err)
		}
		if r.Owns(0, 0) || r.Subtasks() != nil {
			t.Errorf("%+v: an invalid request owns something", r)
		}
	}
}

func TestSubtasks(t *testing.T) {
	cases := []struct {
		r    Request
		want []int
	}{
		{Request{Subtask: 1, Parallelism: 2}, []int{1}},
		{Request{Subtask: 1, Parallelism: 2, Restored: true, PreviousParallelism: 4, States: []State{{Subtask: 0}, {Subtask: 2, From: 5}}}, []int{0, 2}},
		{Request{Subtask: 3, Parallelism: 4, Restored: true, PreviousParallelism: 2}, []int{3}},
		{Request{Subtask: 0, Parallelism: 2, Restored: true, States: []State{{Subtask: 5}}}, []int{5}},
		{Request{Subtask: 0, Parallelism: 2, Restored: true}, nil},
		{Request{Subtask: 1, Parallelism: 2, Restored: true, Checkpoint: 3, PreviousParallelism: 5, States: []State{{Subtask: 0}}}, []int{1, 3}},
	}
	for _, c := range cases {
		c.r.Parser = Scheme{}
		if got := c.r.Subtasks(); !slices.Equal(got, c.want) {
			t.Errorf("%+v: Subtasks = %v, want %v", c.r, got, c.want)
		}
	}
}

// TestExactlyOneWriter checks the rule as a whole: for a run at
// parallelism prev that left names of every subtask behind (those of
// subtasks at or above prev from an even earlier run), and every way of
// handing its writer states to the writers of a restore at parallelism p
// (each state to exactly one writer, as the runtime does, in any order),
// every leftover name is aborted by exactly one writer and no name below
// its state's From by any. The same holds with nothing restored.
func TestExactlyOneWriter(t *testing.T) {
	s := Scheme{Prefix: "j-"}
	const earlier = 9 // subtasks of the earliest run
	var names []string
	for j := range earlier {
		for seq := range int64(4) {
			names = append(names, s.Format(j, seq))
		}
	}
	from := func(j int) int64 { return int64(j % 3) } // names of j below this belong to the checkpoint
	for prev := 1; prev <= 6; prev++ {
		for p := 1; p <= 6; p++ {
			for shift := range p { // which writer the first state reaches
				t.Run(fmt.Sprintf("%d→%d/shift%d", prev, p, shift), func(t *testing.T) {
					states := make([][]State, p)
					for j := range prev {
						w := (j + shift) % p
						states[w] = append(states[w], State{Subtask: j, From: from(j)})
					}
					count := map[string]int{}
					for w := range p {
						got, err := Abort(Request{Parser: s, Subtask: w, Parallelism: p, Restored: true, PreviousParallelism: prev,
							States: states[w], Existing: names})
						if err != nil {
							t.Fatal(err)
						}
						for _, n := range got {
							count[n]++
						}
					}
					for _, n := range names {
						j, seq, _ := s.Parse(n)
						want := 1
						if j < prev && seq < from(j) {
							want = 0
						}
						if count[n] != want {
							t.Errorf("%s aborted by %d writers, want %d", n, count[n], want)
						}
					}
				})
			}
		}
	}
	for p := 1; p <= 6; p++ {
		count := map[string]int{}
		for w := range p {
			got, _ := Abort(Request{Parser: s, Subtask: w, Parallelism: p, Existing: names})
			for _, n := range got {
				count[n]++
			}
		}
		for _, n := range names {
			if count[n] != 1 {
				t.Errorf("fresh start at %d: %s aborted by %d writers, want 1", p, n, count[n])
			}
		}
	}
}

// TestExactlyOneWriterByCheckpoint is TestExactlyOneWriter for names
// numbered by checkpoint id: whatever the parallelisms, every name
// prepared after the restored checkpoint is aborted by exactly one
// writer, and none prepared at or before it by any.
func TestExactlyOneWriterByCheckpoint(t *testing.T) {
	s := Scheme{Prefix: "pg-"}
	const restored = 5
	var names []string
	for j := range 9 {
		for cp := int64(3); cp <= 8; cp++ {
			names = append(names, s.Format(j, cp))
		}
	}
	for p := 1; p <= 6; p++ {
		count := map[string]int{}
		for w := range p {
			got, err := Abort(Request{Parser: s, Subtask: w, Parallelism: p, Restored: true, Checkpoint: restored, Existing: names})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range got {
				count[n]++
			}
		}
		for _, n := range names {
			_, cp, _ := s.Parse(n)
			want := 0
			if cp > restored {
				want = 1
			}
			if count[n] != want {
				t.Errorf("parallelism %d: %s aborted by %d writers, want %d", p, n, count[n], want)
			}
		}
	}
}
