package hybrid

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sim is a tiny single-goroutine runtime for one hybrid source: an
// enumerator, p readers, FIFO mailboxes to the readers and an inbox to the
// enumerator, checkpoints (enumerator first, then a trigger in every
// mailbox) and restores with the runtime's round-robin redistribution. A
// seeded random schedule decides who runs in each step, keeping every
// channel FIFO, so tests explore many interleavings reproducibly.
type sim struct {
	t        *testing.T
	src      *Source[int64]
	p        int
	attempt  int
	rng      *rand.Rand
	enum     source.Enumerator[Split, EnumState]
	readers  []source.Reader[int64, Split]
	mail     [][]simMsg
	inbox    []coordMsg
	out      [][]int64 // emitted per reader
	ended    []bool
	ckpts    map[int64]*simCkpt
	epoch    int64                // the last checkpoint whose enumerator snapshot began
	assigned map[int][]assignment // per subtask, for regional restarts
	async    []asyncCall
	failed   error
	steps    int
}

type simKind int

const (
	mAssign simKind = iota
	mNoMore
	mEvent
	mTrigger
	mComplete
)

type simMsg struct {
	kind   simKind
	splits []Split
	event  source.Event
	id     int64
}

type coordMsg struct {
	sub     int
	request bool
	event   source.Event
}

type assignment struct {
	epoch  int64
	splits []Split
}

type asyncCall struct {
	fn      func(context.Context) (any, error)
	handler func(any, error)
}

// simCkpt is a checkpoint: the enumerator's state, each reader's splits,
// and how much of each reader's output it covers (a two-phase sink's
// committed prefix).
type simCkpt struct {
	id     int64
	enum   []byte
	splits map[int][][]byte
	outLen map[int]int
}

func (c *simCkpt) complete(p int) bool { return len(c.splits) == p }

type simEnumCtx struct{ s *sim }

func (c *simEnumCtx) Parallelism() int { return c.s.p }
func (c *simEnumCtx) RegisteredReaders() map[int]source.ReaderInfo {
	m := map[int]source.ReaderInfo{}
	for i := range c.s.p {
		m[i] = source.ReaderInfo{Subtask: i, Location: "local"}
	}
	return m
}
func (c *simEnumCtx) AssignSplits(a map[int][]Split) error {
	for _, sub := range slices.Sorted(maps.Keys(a)) {
		if sub < 0 || sub >= c.s.p {
			return fmt.Errorf("assign to subtask %d of %d", sub, c.s.p)
		}
		c.s.mail[sub] = append(c.s.mail[sub], simMsg{kind: mAssign, splits: slices.Clone(a[sub])})
		c.s.assigned[sub] = append(c.s.assigned[sub], assignment{c.s.epoch, slices.Clone(a[sub])})
	}
	return nil
}
func (c *simEnumCtx) SignalNoMoreSplits(sub int) {
	c.s.mail[sub] = append(c.s.mail[sub], simMsg{kind: mNoMore})
}
func (c *simEnumCtx) SendEventToReader(sub int, e source.Event) {
	if sub >= 0 && sub < c.s.p {
		c.s.mail[sub] = append(c.s.mail[sub], simMsg{kind: mEvent, event: e})
	}
}
func (c *simEnumCtx) CallAsync(fn func(context.Context) (any, error), handler func(any, error), _, _ time.Duration) {
	c.s.async = append(c.s.async, asyncCall{fn, handler})
}
func (c *simEnumCtx) Metrics() metrics.Group { return metrics.Discard() }
func (c *simEnumCtx) FailJob(err error) {
	if c.s.failed == nil {
		c.s.failed = err
	}
}

type simReaderCtx struct {
	s   *sim
	sub int
}

func (c *simReaderCtx) SubtaskIndex() int { return c.sub }
func (c *simReaderCtx) Parallelism() int  { return c.s.p }
func (c *simReaderCtx) Attempt() int      { return c.s.attempt }
func (c *simReaderCtx) JobID() string     { return "sim" }

func (c *simReaderCtx) SendSplitRequest() {
	c.s.inbox = append(c.s.inbox, coordMsg{sub: c.sub, request: true})
}
func (c *simReaderCtx) SendEventToEnumerator(e source.Event) {
	c.s.inbox = append(c.s.inbox, coordMsg{sub: c.sub, event: e})
}
func (c *simReaderCtx) Metrics() metrics.Group { return metrics.Discard() }

// simOutput collects one reader's records.
type simOutput struct{ recs *[]int64 }

func (o simOutput) Collect(v int64)                      { *o.recs = append(*o.recs, v) }
func (o simOutput) CollectAt(v int64, _ int64)           { *o.recs = append(*o.recs, v) }
func (o simOutput) EmitWatermark(int64)                  {}
func (o simOutput) MarkIdle()                            {}
func (o simOutput) ForSplit(string) source.Output[int64] { return o }
func (o simOutput) ReleaseSplit(string)                  {}

// newSim starts a sim the way the runtime starts a job: the enumerator
// (fresh, or restored from ck), AddReader for every reader, then the
// readers with their restored splits, spread round-robin if the
// parallelism changed.
func newSim(t *testing.T, src *Source[int64], p int, seed uint64, attempt int, ck *simCkpt) *sim {
	t.Helper()
	s := &sim{t: t, src: src, p: p, attempt: attempt, rng: rand.New(rand.NewPCG(seed, uint64(attempt))),
		mail: make([][]simMsg, p), out: make([][]int64, p), ended: make([]bool, p), ckpts: map[int64]*simCkpt{},
		assigned: map[int][]assignment{}}
	var err error
	if ck == nil {
		s.enum, err = src.CreateEnumerator(&simEnumCtx{s})
	} else {
		st, derr := serde.Unmarshal(src.EnumeratorStateSerializer(), ck.enum)
		if derr != nil {
			t.Fatal(derr)
		}
		s.enum, err = src.RestoreEnumerator(&simEnumCtx{s}, st)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.enum.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range p {
		if err := s.enum.AddReader(i); err != nil {
			t.Fatal(err)
		}
	}
	restored := make([][][]byte, p)
	if ck != nil {
		k := 0
		for _, sub := range slices.Sorted(maps.Keys(ck.splits)) {
			for _, b := range ck.splits[sub] {
				restored[k%p] = append(restored[k%p], b)
				k++
			}
		}
	}
	for i := range p {
		r, err := src.CreateReader(&simReaderCtx{s, i})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(restored[i]) > 0 {
			ss, err := serde.UnmarshalAll(src.SplitSerializer(), restored[i])
			if err != nil {
				t.Fatal(err)
			}
			if err := r.AddSplits(ss); err != nil {
				t.Fatal(err)
			}
		}
		s.readers = append(s.readers, r)
	}
	return s
}

func (s *sim) close() {
	for _, r := range s.readers {
		if err := r.Close(); err != nil {
			s.t.Fatal(err)
		}
	}
	if err := s.enum.Close(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) must(err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatalf("attempt %d step %d: %v", s.attempt, s.steps, err)
	}
}

// coordinate handles everything in the enumerator's inbox.
func (s *sim) coordinate() {
	msgs := s.inbox
	s.inbox = nil
	for _, m := range msgs {
		if m.request {
			s.must(s.enum.HandleSplitRequest(m.sub, "local"))
		} else {
			s.must(s.enum.(source.EnumeratorEventHandler).HandleSourceEvent(m.sub, m.event))
		}
	}
}

// deliver hands a reader its mails, up to n of them (n < 0: all).
func (s *sim) deliver(sub, n int) {
	r := s.readers[sub]
	for ; len(s.mail[sub]) > 0 && n != 0; n-- {
		m := s.mail[sub][0]
		s.mail[sub] = s.mail[sub][1:]
		switch m.kind {
		case mAssign:
			s.must(r.AddSplits(m.splits))
		case mNoMore:
			r.NotifyNoMoreSplits()
		case mEvent:
			s.must(r.(source.ReaderEventHandler).HandleSourceEvent(m.event))
		case mTrigger:
			ss, err := r.SnapshotState(m.id)
			s.must(err)
			b, err := serde.MarshalAll(s.src.SplitSerializer(), ss)
			s.must(err)
			ck := s.ckpts[m.id]
			if ck == nil {
				continue // aborted by a regional restart
			}
			ck.splits[sub], ck.outLen[sub] = b, len(s.out[sub])
			if ck.complete(s.p) {
				s.must(s.enum.(source.CheckpointListener).NotifyCheckpointComplete(m.id))
				for i := range s.p {
					s.mail[i] = append(s.mail[i], simMsg{kind: mComplete, id: m.id})
				}
			}
		case mComplete:
			s.must(r.(source.CheckpointListener).NotifyCheckpointComplete(m.id))
		}
	}
}

func (s *sim) poll(sub int) {
	if s.ended[sub] {
		return
	}
	st, err := s.readers[sub].PollNext(simOutput{&s.out[sub]})
	s.must(err)
	s.ended[sub] = st == source.EndOfInput
}

// step runs one random round: maybe the enumerator, then each reader in
// random order maybe takes some mails and maybe polls.
func (s *sim) step() {
	s.steps++
	if s.rng.IntN(3) > 0 {
		s.coordinate()
	}
	for _, sub := range s.rng.Perm(s.p) {
		if s.rng.IntN(3) > 0 {
			s.deliver(sub, s.rng.IntN(3)-1)
		}
		if s.rng.IntN(4) > 0 {
			s.poll(sub)
		}
	}
}

// checkpoint snapshots the enumerator and puts a trigger into every
// reader's mailbox.
func (s *sim) checkpoint(id int64) *simCkpt {
	st, err := s.enum.SnapshotState(id)
	s.must(err)
	b, err := serde.Marshal(s.src.EnumeratorStateSerializer(), st)
	s.must(err)
	ck := &simCkpt{id: id, enum: b, splits: map[int][][]byte{}, outLen: map[int]int{}}
	s.ckpts[id] = ck
	s.epoch = id
	for i := range s.p {
		s.mail[i] = append(s.mail[i], simMsg{kind: mTrigger, id: id})
	}
	return ck
}

// restartRegion fails reader sub alone and restarts it from the latest
// completed checkpoint (none: from the start), the way the runtime's
// regional failover does: incomplete checkpoints are aborted, the reader's
// mails and messages die with it, its sink drops what the checkpoint does
// not cover, the splits assigned to it after the checkpoint's enumerator
// snapshot go back to the enumerator, then the reader registers again and
// a new reader starts with the checkpoint's splits.
func (s *sim) restartRegion(sub int) {
	var ck *simCkpt
	for id, c := range s.ckpts {
		if !c.complete(s.p) {
			delete(s.ckpts, id)
		} else if ck == nil || id > ck.id {
			ck = c
		}
	}
	s.must(s.readers[sub].Close())
	s.mail[sub] = nil
	s.inbox = slices.DeleteFunc(s.inbox, func(m coordMsg) bool { return m.sub == sub })
	var restored [][]byte
	var from int64
	if ck != nil {
		from, restored = ck.id, ck.splits[sub]
		s.out[sub] = s.out[sub][:ck.outLen[sub]]
	} else {
		s.out[sub] = nil
	}
	var back []Split
	keep := s.assigned[sub][:0]
	for _, a := range s.assigned[sub] {
		if a.epoch >= from {
			back = append(back, a.splits...)
		} else {
			keep = append(keep, a)
		}
	}
	s.assigned[sub] = keep
	if len(back) > 0 {
		s.must(s.enum.AddSplitsBack(back, sub))
	}
	s.must(s.enum.AddReader(sub))
	r, err := s.src.CreateReader(&simReaderCtx{s, sub})
	s.must(err)
	s.must(r.Start(context.Background()))
	if len(restored) > 0 {
		ss, err := serde.UnmarshalAll(s.src.SplitSerializer(), restored)
		s.must(err)
		s.must(r.AddSplits(ss))
	}
	s.readers[sub], s.ended[sub] = r, false
}

func (s *sim) allEnded() bool { return !slices.Contains(s.ended, false) }

// runToEnd steps until every reader ended and every mail is delivered.
func (s *sim) runToEnd() {
	for s.steps < 100_000 {
		if s.allEnded() && len(s.inbox) == 0 && !slices.ContainsFunc(s.mail, func(m []simMsg) bool { return len(m) > 0 }) {
			return
		}
		s.step()
	}
	s.t.Fatalf("attempt %d not finished after %d steps: ended %v", s.attempt, s.steps, s.ended)
}

// committed returns the output covered by checkpoint ck.
func (s *sim) committed(ck *simCkpt) []int64 {
	var out []int64
	for sub := range s.p {
		out = append(out, s.out[sub][:ck.outLen[sub]]...)
	}
	return out
}

func (s *sim) all() []int64 {
	var out []int64
	for _, o := range s.out {
		out = append(out, o...)
	}
	return out
}

// expectOnce checks that got holds every value of want once.
func expectOnce(t *testing.T, got, want []int64) {
	t.Helper()
	seen := map[int64]int{}
	for _, v := range got {
		seen[v]++
	}
	var missing, dup []int64
	for _, v := range want {
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dup = append(dup, v)
		}
		delete(seen, v)
	}
	if len(got) != len(want) || len(missing) > 0 || len(dup) > 0 || len(seen) > 0 {
		first := func(vs []int64) string {
			if len(vs) == 0 {
				return "none"
			}
			return fmt.Sprint(vs[0])
		}
		t.Fatalf("got %d records, want %d: %d missing (first %s), %d duplicated (first %s), %d unexpected",
			len(got), len(want), len(missing), first(missing), len(dup), first(dup), len(seen))
	}
}
