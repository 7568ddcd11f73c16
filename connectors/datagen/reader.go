package datagen

import (
	"context"
	"slices"

	"github.com/sluice-io/sluice/internal/ratelimit"
	"github.com/sluice-io/sluice/source"
)

// closedCh is ready forever.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type waitReason int

const (
	notWaiting waitReason = iota
	waitSplits
	waitTokens
)

// reader emits the records of its splits, BatchSize at most per PollNext,
// taking turns between its splits. It is used from its subtask's goroutine
// only; its rate-limit timer's callback only closes a channel.
type reader[T any] struct {
	gen     func(int64) T
	ts      func(int64) int64
	ctx     source.ReaderContext
	pull    bool
	endless bool // unbounded source: its splits never finish
	splits  []Split
	ids     []string // SplitID of splits[i], computed once
	cur     int      // index into splits of the split to emit from next
	noMore  bool
	asked   bool // a split request is open
	idle    bool // MarkIdle was sent and nothing emitted since
	wait    waitReason
	splitCh chan struct{} // closed by AddSplits / NotifyNoMoreSplits
	limiter *ratelimit.Limiter
	want    int // tokens to wait for when the bucket is empty
	timer   ratelimit.Timer
	paused  map[string]struct{} // split ids paused by watermark alignment
	vals    []T                 // reused buffer for BatchCollector outputs
}

var _ source.SplitPauser = (*reader[int])(nil)

func newReader[T any](s *Source[T], ctx source.ReaderContext) *reader[T] {
	r := &reader[T]{
		gen:     s.gen,
		ts:      s.cfg.ts,
		ctx:     ctx,
		pull:    !s.cfg.push,
		endless: s.cfg.count == 0,
	}
	if s.cfg.rate > 0 {
		per := s.cfg.rate / float64(max(ctx.Parallelism(), 1))
		burst := ratelimit.BurstFor(per, BatchSize)
		r.limiter = ratelimit.NewLimiter(per, burst, s.cfg.now)
		r.want = max(1, burst/4)
	}
	return r
}

func (r *reader[T]) Start(context.Context) error {
	r.requestSplit()
	return nil
}

func (r *reader[T]) requestSplit() {
	if r.pull && !r.noMore && !r.asked {
		r.asked = true
		r.ctx.SendSplitRequest()
	}
}

func (r *reader[T]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, nil
		}
		if !r.idle {
			r.idle = true
			out.MarkIdle()
		}
		r.wait = waitSplits
		return source.NothingAvailable, nil
	}
	if r.cur >= len(r.splits) {
		r.cur = 0
	}
	if len(r.paused) > 0 && !r.skipPaused() {
		r.wait = waitSplits // every split is paused: wait for a resume
		return source.NothingAvailable, nil
	}
	sp := &r.splits[r.cur]
	n := int(min(sp.Remaining(), BatchSize))
	if n > 0 && r.limiter != nil {
		if n = r.limiter.Take(n); n == 0 {
			r.timer.Arm(r.limiter.Delay(r.want))
			r.wait = waitTokens
			return source.NothingAvailable, nil
		}
	}
	r.wait = notWaiting
	if n > 0 {
		r.idle = false
		so := out.ForSplit(r.ids[r.cur])
		idx, stride, gen := sp.Next, sp.Stride, r.gen
		if ts := r.ts; ts != nil {
			for range n {
				so.CollectAt(gen(idx), ts(idx))
				idx += stride
			}
		} else if bc, ok := so.(source.BatchCollector[T]); ok {
			// One call for the batch instead of one Collect per record.
			vs := slices.Grow(r.vals[:0], n)[:n]
			for i := range vs {
				vs[i] = gen(idx)
				idx += stride
			}
			bc.CollectBatch(vs)
			clear(vs)
			r.vals = vs[:0]
		} else {
			for range n {
				so.Collect(gen(idx))
				idx += stride
			}
		}
		sp.Next = idx
	}
	if sp.Remaining() == 0 {
		delete(r.paused, r.ids[r.cur])
		out.ReleaseSplit(r.ids[r.cur])
		r.splits = slices.Delete(r.splits, r.cur, r.cur+1)
		r.ids = slices.Delete(r.ids, r.cur, r.cur+1)
		r.requestSplit()
	} else {
		r.cur++
	}
	if len(r.splits) == 0 && r.noMore {
		return source.EndOfInput, nil
	}
	return source.MoreAvailable, nil
}

// skipPaused moves cur to the next split that is not paused and reports
// whether there is one.
func (r *reader[T]) skipPaused() bool {
	for k := range len(r.splits) {
		i := (r.cur + k) % len(r.splits)
		if _, p := r.paused[r.ids[i]]; !p {
			r.cur = i
			return true
		}
	}
	return false
}

// PauseOrResumeSplits stops and restarts emitting from splits (watermark
// alignment). Ids of splits the reader does not hold are ignored.
func (r *reader[T]) PauseOrResumeSplits(pause, resume []string) error {
	for _, id := range pause {
		if slices.Contains(r.ids, id) {
			if r.paused == nil {
				r.paused = map[string]struct{}{}
			}
			r.paused[id] = struct{}{}
		}
	}
	resumed := false
	for _, id := range resume {
		if _, ok := r.paused[id]; ok {
			delete(r.paused, id)
			resumed = true
		}
	}
	if resumed {
		r.wake()
	}
	return nil
}

func (r *reader[T]) Available() <-chan struct{} {
	switch r.wait {
	case waitSplits:
		if r.splitCh == nil {
			r.splitCh = make(chan struct{})
		}
		return r.splitCh
	case waitTokens:
		if c := r.timer.C(); c != nil {
			return c
		}
	}
	return closedCh
}

func (r *reader[T]) wake() {
	if r.wait == waitSplits {
		r.wait = notWaiting
	}
	if r.splitCh != nil {
		close(r.splitCh)
		r.splitCh = nil
	}
}

func (r *reader[T]) AddSplits(splits []Split) error {
	for _, sp := range splits {
		r.splits = append(r.splits, sp)
		r.ids = append(r.ids, sp.SplitID())
	}
	r.asked = false
	// A split of an unbounded source never finishes, so a pulling reader
	// that asked only after finishing one would never get a second: it
	// keeps one request open instead, and the enumerator serves it when
	// it has a split to spare (issue 11).
	if r.endless && len(splits) > 0 {
		r.requestSplit()
	}
	r.wake()
	return nil
}

func (r *reader[T]) NotifyNoMoreSplits() {
	r.noMore = true
	r.asked = false
	r.wake()
}

func (r *reader[T]) SnapshotState(int64) ([]Split, error) {
	return slices.Clone(r.splits), nil
}

func (r *reader[T]) Close() error {
	r.timer.Stop()
	return nil
}
