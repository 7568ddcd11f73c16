package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultConnectTimeout is the default of [SinkConnectTimeout] and
// [SourceConnectTimeout].
const DefaultConnectTimeout = 30 * time.Second

// unreachableWarnEvery is how often at most a broker that stays
// unreachable is logged again (a variable for tests).
var unreachableWarnEvery = 10 * time.Second

// UnreachableError is the error of a source or sink whose brokers could
// not be reached for its connect timeout: no connection could be opened
// and no request was answered. It matches [ErrBrokersUnreachable].
type UnreachableError struct {
	Role    string        // "kafka source", "kafka sink"
	Brokers []string      // the bootstrap brokers
	Targets []string      // the brokers (host:port) that could not be reached
	Down    time.Duration // how long nothing could be reached
	Timeout time.Duration // the connect timeout
	Last    error         // the last connection error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("%s: %v: cannot reach %v (bootstrap brokers %v) for %v (connect timeout %v): last error: %v",
		e.Role, ErrBrokersUnreachable, e.Targets, e.Brokers, e.Down.Round(time.Millisecond), e.Timeout, e.Last)
}

// Is matches ErrBrokersUnreachable.
func (e *UnreachableError) Is(target error) bool { return target == ErrBrokersUnreachable }

// Unwrap returns the last connection error.
func (e *UnreachableError) Unwrap() error { return e.Last }

// reach watches the connections of a writer's or reader's clients
// (franz-go hooks): it logs a warning as soon as a broker cannot be
// reached, naming it, and again at most every unreachableWarnEvery with
// how long it has been down; a line when it is reachable again; and it
// cancels its context with an *UnreachableError once nothing could be
// reached for timeout. Blocking calls of its owner run under
// [reach.bound], so they fail then.
type reach struct {
	log       *slog.Logger
	role      string
	brokers   []string
	timeout   time.Duration
	warnEvery time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	outageOn atomic.Bool // an outage is being timed: successes must take mu

	mu      sync.Mutex
	down    map[string]*downState // by host:port
	outage  time.Time             // first failure since the last success
	lastErr error
	timer   *time.Timer
	closed  bool
}

type downState struct {
	since, lastWarn time.Time
	node            int32
}

func newReach(log *slog.Logger, role string, brokers []string, timeout time.Duration) *reach {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &reach{log: log, role: role, brokers: brokers, timeout: timeout, warnEvery: unreachableWarnEvery,
		ctx: ctx, cancel: cancel, down: map[string]*downState{}}
}

// opt is the client option that installs the hooks.
func (r *reach) opt() kgo.Opt { return kgo.WithHooks(reachHooks{r}) }

// reachHooks keeps the hook methods off reach's method set.
type reachHooks struct{ r *reach }

var (
	_ kgo.HookBrokerConnect = reachHooks{}
	_ kgo.HookBrokerE2E     = reachHooks{}
)

func (h reachHooks) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	h.r.connected(meta, err)
}

func (h reachHooks) OnBrokerE2E(_ kgo.BrokerMetadata, _ int16, e kgo.BrokerE2E) {
	if e.Err() == nil && h.r.outageOn.Load() {
		h.r.mu.Lock()
		h.r.succeededLocked()
		h.r.mu.Unlock()
	}
}

func nodeName(meta kgo.BrokerMetadata) string {
	if meta.NodeID < 0 {
		return "bootstrap"
	}
	return strconv.Itoa(int(meta.NodeID))
}

// connected records a connection attempt.
func (r *reach) connected(meta kgo.BrokerMetadata, err error) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	d := r.down[addr]
	if err == nil {
		if d != nil {
			r.log.Info(r.role+": broker reachable again", "broker", addr, "node", nodeName(meta),
				"down_for", now.Sub(d.since).Round(time.Millisecond))
			delete(r.down, addr)
		}
		r.succeededLocked()
		return
	}
	if errors.Is(err, context.Canceled) {
		return // the client is closing
	}
	r.lastErr = err
	switch {
	case d == nil && isSecurityErr(err):
		// Not an outage: the job fails on it (ErrSecurity), no retry helps.
		r.down[addr] = &downState{since: now, lastWarn: now, node: meta.NodeID}
		r.log.Error(r.role+": broker refused the TLS or SASL settings", "broker", addr, "node", nodeName(meta), "error", err)
	case d == nil:
		r.down[addr] = &downState{since: now, lastWarn: now, node: meta.NodeID}
		r.log.Warn(r.role+": cannot reach broker; retrying", "broker", addr, "node", nodeName(meta),
			"error", err, "fails_after", r.timeout)
	case now.Sub(d.lastWarn) >= r.warnEvery:
		d.lastWarn = now
		r.log.Warn(r.role+": broker still unreachable; retrying", "broker", addr, "node", nodeName(meta),
			"down_for", now.Sub(d.since).Round(time.Millisecond), "error", err, "fails_after", r.timeout)
	}
	if r.outage.IsZero() {
		r.outage = now
		r.outageOn.Store(true)
		if r.timer == nil {
			r.timer = time.AfterFunc(r.timeout, r.expire)
		} else {
			r.timer.Reset(r.timeout)
		}
	}
}

// succeededLocked ends the timed outage: a broker answered.
func (r *reach) succeededLocked() {
	r.outage = time.Time{}
	r.outageOn.Store(false)
	if r.timer != nil {
		r.timer.Stop()
	}
}

// expire fails the context if the outage lasted timeout.
func (r *reach) expire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.outage.IsZero() || r.ctx.Err() != nil {
		return
	}
	down := time.Since(r.outage)
	if down < r.timeout {
		r.timer.Reset(r.timeout - down)
		return
	}
	var targets []string
	for a := range r.down {
		targets = append(targets, a)
	}
	r.cancel(&UnreachableError{Role: r.role, Brokers: r.brokers, Targets: targets, Down: down, Timeout: r.timeout, Last: r.lastErr})
}

// err is the *UnreachableError once the brokers were unreachable for the
// timeout, else nil.
func (r *reach) err() error {
	select {
	case <-r.ctx.Done():
	default:
		return nil // the common case, without context.Cause's lock
	}
	var u *UnreachableError
	if errors.As(context.Cause(r.ctx), &u) {
		return u
	}
	return nil
}

// bound returns ctx, also cancelled when the brokers have been
// unreachable for the timeout; [reach.cause] then tells why.
func (r *reach) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cancel(context.Cause(r.ctx)) })
	return c, func() { stop(); cancel(context.Canceled) }
}

// cause returns the *UnreachableError when err came from a context that
// [reach.bound] cancelled for it, else err.
func (r *reach) cause(err error) error {
	if err == nil {
		return nil
	}
	if u := r.err(); u != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return u
	}
	return err
}

// isDialErr reports a connection that could not be opened.
func isDialErr(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// close stops the timer; later connection events are ignored.
func (r *reach) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
	r.cancel(context.Canceled)
}
