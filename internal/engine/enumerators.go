package engine

// Enumerators run on the coordinator goroutine; enumContext is their
// source.EnumeratorContext.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
)

// enumContext is the shared, untyped part of an EnumeratorContext.
type enumContext struct {
	att         *attempt
	v           *vertex
	parallelism int
	readers     map[int]source.ReaderInfo
	enum        enumHandle
	metrics     metrics.Group
}

func (c *enumContext) Parallelism() int { return c.parallelism }

func (c *enumContext) RegisteredReaders() map[int]source.ReaderInfo {
	return maps.Clone(c.readers)
}

func (c *enumContext) Metrics() metrics.Group { return c.metrics }

func (c *enumContext) assign(subtask int, splits any) {
	c.att.fo.assign(taskKey{c.v.id, subtask}, splits)
	c.att.post(c.v, subtask, mail{kind: mailAddSplits, payload: splits})
}

// post delivers a mail from the enumerator side to a reader. While the
// coordinator snapshots enumerators for a checkpoint, such mails are held
// back and delivered after the checkpoint's triggers, so that a split
// assigned after an enumerator's snapshot reaches its reader after the
// reader's snapshot (Flink closes its operator-event gateways the same way).
func (a *attempt) post(v *vertex, subtask int, m mail) {
	if a.holding {
		a.held = append(a.held, heldMail{v, subtask, m})
		return
	}
	a.tasks[v][subtask].post(m)
}

type heldMail struct {
	v       *vertex
	subtask int
	m       mail
}

func (c *enumContext) FailJob(err error) {
	if err != nil && c.att.enumFailure == nil {
		c.att.enumFailure = enumError(c.v, "failed", err)
	}
}

func (c *enumContext) SignalNoMoreSplits(subtask int) {
	if subtask < 0 || subtask >= c.parallelism {
		return
	}
	c.att.post(c.v, subtask, mail{kind: mailNoMoreSplits})
}

func (c *enumContext) SendEventToReader(subtask int, e source.Event) {
	if subtask < 0 || subtask >= c.parallelism {
		return
	}
	c.att.post(c.v, subtask, mail{kind: mailEvent, payload: e})
}

func (c *enumContext) CallAsync(fn func(context.Context) (any, error), handler func(any, error), delay, period time.Duration) {
	a := c.att
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		wait := delay
		for {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-a.ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			} else if a.ctx.Err() != nil {
				return
			}
			res, err, perr := c.callAsync(fn)
			if a.ctx.Err() != nil {
				return
			}
			if perr != nil {
				// fn panicked: the job fails (naming the source's
				// enumerator); a periodic call is not repeated.
				a.inbox.Put(asyncMsg{v: c.v, err: perr})
				return
			}
			a.inbox.Put(asyncMsg{v: c.v, handler: func() { handler(res, err) }})
			if period <= 0 {
				return
			}
			wait = period
		}
	}()
}

// callAsync runs a CallAsync function, turning a panic into perr.
func (c *enumContext) callAsync(fn func(context.Context) (any, error)) (res any, err, perr error) {
	defer recoverTo(&perr, c.log(), "CallAsync function")
	res, err = fn(c.att.ctx)
	return res, err, nil
}

func (c *enumContext) log() *slog.Logger {
	return c.att.job.log.With("operator", c.v.head().name, "subtask", "coordinator")
}

// startEnumerators creates every source's enumerator (from its restored
// state), starts it and registers its readers.
func (a *attempt) startEnumerators() error {
	j := a.job
	for _, v := range j.vertices {
		head := v.head()
		if head.kind != kindSource {
			continue
		}
		ec := &enumContext{att: a, v: v, parallelism: v.parallelism, readers: map[int]source.ReaderInfo{},
			metrics: j.metricRoot.With("operator", head.name).With("subtask", "coordinator")}
		var state []byte
		if a.restore != nil {
			state = a.restore.Enumerators[head.UID()]
		}
		e, err := head.src.newEnumerator(ec, state)
		if err != nil {
			return enumError(v, "create enumerator", err)
		}
		ec.enum = e
		a.enums[v] = ec
	}
	for _, ec := range a.enumsInOrder() {
		// In the local runtime every reader exists from the start: they are
		// registered before Start (so Start may assign to them), and
		// AddReader follows for each.
		for i := range ec.parallelism {
			ec.readers[i] = source.ReaderInfo{Subtask: i, Location: "local"}
		}
		if err := ec.enum.start(a.ctx); err != nil {
			return enumError(ec.v, "start enumerator", err)
		}
		for i := range ec.parallelism {
			if err := ec.enum.addReader(i); err != nil {
				return enumError(ec.v, fmt.Sprintf("add reader %d", i), err)
			}
		}
	}
	return nil
}

func (a *attempt) enumsInOrder() []*enumContext {
	var out []*enumContext
	for _, v := range a.job.vertices {
		if ec := a.enums[v]; ec != nil {
			out = append(out, ec)
		}
	}
	return out
}

func enumError(v *vertex, what string, err error) error {
	return &TaskError{Operator: v.head().name + " (enumerator)", Subtask: -1, Err: fmt.Errorf("%s: %w", what, err)}
}
