package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// State keys of the job record, written by leaders through fenced writes
// (relative to the coordination state namespace, like coord.CheckpointKey).
const (
	// StateJobID holds the job id every leader runs the job under.
	StateJobID = "job/id"
	// StateFinished is written by the leader whose job finished (its input
	// ended and its final checkpoint was committed); later leaders do not
	// run the job again.
	StateFinished = "job/finished"
)

// Term is what Lead gets for one won election.
type Term struct {
	// Leadership is the won election; the job's fenced writes go through it.
	Leadership coord.Leadership
	// Reader reads coordination state.
	Reader coord.Reader
	// JobID is the cluster-wide job id (StateJobID).
	JobID string
	// Restore is the published pointer to restore from; nil: start fresh.
	Restore *coord.CheckpointPointer
	// Lost ends the term: the job's context is cancelled with err as its
	// cause. Storage calls it when a fenced write was refused.
	Lost func(err error)
	// Metrics are the node's metrics (Storage records its publishes
	// there); nil records nothing.
	Metrics *Metrics
	// Members returns the live members of the cluster (this node among
	// them), sorted by id: the nodes whose Work is expected to link.
	Members func(ctx context.Context) ([]coord.Member, error)
}

// Leader is the leader a standby works for (Config.Work).
type Leader struct {
	ID   string // its node id
	Term int64  // its term
	Addr string // the address it announced in membership ("" if none)
}

// Config configures Run. NodeID, Connect and Lead are required.
type Config struct {
	// NodeID names this node; unique among live nodes.
	NodeID string
	// Addr is the address announced in membership, where this node
	// serves the other nodes' links while it leads ("" if it does not).
	Addr string
	// Connect opens a new session with the coordination store. Run calls it
	// at start and again whenever the session ended; it closes what it got.
	Connect func(ctx context.Context) (coord.Coordinator, error)
	// Lead runs the job while this node leads. It must return soon after
	// ctx ends. A nil error means the job finished (Run marks it finished
	// and returns nil); an error while ctx is live means the job failed
	// (Run resigns and returns it).
	Lead func(ctx context.Context, t Term) error
	// Logger; default slog.Default().
	Logger *slog.Logger
	// RetryDelay is the pause before retrying a failed Connect, Join or
	// election step, doubled for each failure in a row up to 5s; default
	// 500ms.
	RetryDelay time.Duration
	// PauseLimit ends a term when the process was paused (SIGSTOP, a stall)
	// longer than this, without waiting for the store to report the lease
	// lost, so a resumed stale leader stops its job at once. Set it to about
	// half the lease TTL; 0 disables the check.
	PauseLimit time.Duration
	// NewJobID makes the job id of a job that has none yet; default 16
	// random hex digits (the runtime's format).
	NewJobID func() string
	// Metrics records the loop's metrics (see Metrics); default a new
	// NewMetrics(NodeID), not exported anywhere.
	Metrics *Metrics
	// TLS is the node's checked mutual TLS material (LoadTLS) for its
	// node-to-node server and clients; nil: plaintext. The loop passes it
	// on untouched: Lead and Work use it.
	TLS *TLS
	// Work, when set, runs this node's share of another leader's job while
	// this node stands by: Run calls it with the leader each time
	// leadership passes to another node (its id, term and announced
	// address), and ends its ctx when the leader changes, when this node
	// wins the election or its session ends; it must return soon after.
	// When it returns while the same leader leads (the link broke), Run
	// calls it again after RetryDelay, doubled for each return in a row
	// that lasted less than a minute, up to 5s. nil: standbys only wait.
	Work func(ctx context.Context, leader Leader) error
}

// ErrLeadershipLost is the cause of a term's context when the term ended:
// wrapped together with what ended it.
var ErrLeadershipLost = errors.New("node: leadership lost")

// What ended a term, wrapped in its cause (see lostCauseOf).
var (
	errLeadershipEnded = errors.New("leadership ended")
	errSessionEnded    = errors.New("coordination session ended")
	errPaused          = errors.New("this process was paused")
)

// lostCauseOf classifies the cause of a lost term for the metrics.
func lostCauseOf(cause error) string {
	switch {
	case errors.Is(cause, errPaused):
		return LostPause
	case errors.Is(cause, errSessionEnded), errors.Is(cause, coord.ErrSessionLost):
		return LostSession
	case errors.Is(cause, coord.ErrFenced):
		return LostFenced
	default:
		return LostOther
	}
}

// Run runs the node loop until ctx ends (it resigns and returns nil), the
// job finished (nil), or the job failed (its error). See the package doc.
func Run(ctx context.Context, cfg Config) error {
	if cfg.NodeID == "" || cfg.Connect == nil || cfg.Lead == nil {
		return errors.New("node: Config needs NodeID, Connect and Lead")
	}
	if err := (coord.Member{ID: cfg.NodeID, Addr: cfg.Addr}).Validate(); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 500 * time.Millisecond
	}
	if cfg.NewJobID == nil {
		cfg.NewJobID = newJobID
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(cfg.NodeID)
	}
	n := &runner{cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID)}
	defer n.closeSession()
	for {
		if ctx.Err() != nil {
			n.log.Info("node stopping")
			return nil
		}
		done, err := n.round(ctx)
		if done || err != nil {
			return err
		}
	}
}

type runner struct {
	cfg   Config
	log   *slog.Logger
	c     coord.Coordinator // the current session, nil when none
	fails int               // failed rounds in a row, for the backoff
}

func (n *runner) closeSession() {
	if n.c != nil {
		_ = n.c.Close()
		n.c = nil
	}
}

// maxBackoff bounds the pause between failed rounds.
const maxBackoff = 5 * time.Second

// pause waits before the next round, or until ctx ends: RetryDelay,
// doubled for each failed round in a row, at most maxBackoff.
func (n *runner) pause(ctx context.Context) {
	d := n.cfg.RetryDelay
	for range min(n.fails, 8) {
		d = min(2*d, maxBackoff)
	}
	n.fails++
	t := time.NewTimer(max(d, n.cfg.RetryDelay))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// session returns a joined session, making a new one when there is none
// or the old one ended.
func (n *runner) session(ctx context.Context) (coord.Coordinator, error) {
	if n.c != nil {
		select {
		case <-n.c.Done():
			n.log.Warn("coordination session ended; opening a new one")
			n.cfg.Metrics.sessionLost()
			n.closeSession()
		default:
			return n.c, nil
		}
	}
	c, err := n.cfg.Connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: connect: %w", n.cfg.NodeID, err)
	}
	if err := c.Join(ctx, coord.Member{ID: n.cfg.NodeID, Addr: n.cfg.Addr}); err != nil {
		_ = c.Close()
		if errors.Is(err, coord.ErrMemberExists) {
			return nil, fmt.Errorf("node %s: join: %w (an earlier process's session; it ends within one lease TTL)", n.cfg.NodeID, err)
		}
		return nil, fmt.Errorf("node %s: join: %w", n.cfg.NodeID, err)
	}
	n.c = c
	n.cfg.Metrics.joined()
	n.log.Info("joined the cluster")
	return c, nil
}

// round is one session-and-campaign round: done reports that Run returns.
func (n *runner) round(ctx context.Context) (done bool, err error) {
	c, err := n.session(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		n.log.Warn("cannot join the cluster; retrying", "error", err)
		n.pause(ctx)
		return false, nil
	}
	wctx, wcancel := context.WithCancel(ctx)
	watchDone := n.watchLeader(wctx, c)
	// A campaign of a session that ended would wait for nothing.
	cctx, ccancel := context.WithCancel(ctx)
	sessWatch := make(chan struct{})
	go func() {
		defer close(sessWatch)
		select {
		case <-c.Done():
			ccancel()
		case <-cctx.Done():
		}
	}()
	l, err := c.Campaign(cctx)
	ccancel()
	<-sessWatch
	wcancel()
	<-watchDone
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		n.log.Warn("campaign failed; retrying", "error", err)
		if errors.Is(err, coord.ErrSessionLost) || errors.Is(err, coord.ErrClosed) {
			n.cfg.Metrics.sessionLost()
			n.closeSession() // a new session next round
		}
		n.pause(ctx)
		return false, nil
	}
	n.fails = 0
	n.cfg.Metrics.elected(l.Term())
	n.log.Info("elected leader", "term", l.Term())
	return n.lead(ctx, c, l)
}

// watchLeader logs the leader while this node stands by and runs Work for
// each leader that is not this node, until ctx ends; the channel it
// returns is closed once Work returned too.
func (n *runner) watchLeader(ctx context.Context, c coord.Coordinator) <-chan struct{} {
	done := make(chan struct{})
	ch, err := c.WatchLeader(ctx)
	if err != nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		var stopWork func()
		defer func() {
			if stopWork != nil {
				stopWork()
			}
		}()
		for li := range ch {
			n.cfg.Metrics.leaderSeen(li.ID, li.Term)
			if stopWork != nil {
				stopWork()
				stopWork = nil
			}
			if li.ID == n.cfg.NodeID {
				continue
			}
			n.log.Info("standing by", "leader", li.ID, "term", li.Term)
			if n.cfg.Work != nil {
				stopWork = n.startWork(ctx, c, li)
			}
		}
	}()
	return done
}

// startWork runs Work for leader li on a goroutine until the returned stop
// is called (stop waits for it).
func (n *runner) startWork(ctx context.Context, c coord.Coordinator, li coord.LeaderInfo) (stop func()) {
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.work(wctx, c, li)
	}()
	return func() {
		cancel()
		<-done
	}
}

// workQuick is how long a Work call must last for the next one to start
// without backoff.
const workQuick = time.Minute

// work calls Work for leader li until ctx ends, pausing between calls.
func (n *runner) work(ctx context.Context, c coord.Coordinator, li coord.LeaderInfo) {
	fails := 0
	for ctx.Err() == nil {
		addr, err := memberAddr(ctx, c, li.ID)
		if err == nil && addr == "" {
			n.log.Info("the leader announces no address (its --node-addr): it runs its job alone", "leader", li.ID, "term", li.Term)
			<-ctx.Done()
			return
		}
		started := time.Now()
		if err == nil {
			n.log.Info("working for the leader", "leader", li.ID, "term", li.Term, "addr", addr)
			err = n.cfg.Work(ctx, Leader{ID: li.ID, Term: li.Term, Addr: addr})
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) >= workQuick {
			fails = 0
		}
		d := n.cfg.RetryDelay
		for range min(fails, 8) {
			d = min(2*d, maxBackoff)
		}
		fails++
		n.log.Warn("not working for the leader; trying again", "leader", li.ID, "term", li.Term, "error", err, "retry_in", d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// memberAddr is the address member id announced ("" if none).
func memberAddr(ctx context.Context, c coord.Coordinator, id string) (string, error) {
	ms, err := c.Members(ctx)
	if err != nil {
		return "", fmt.Errorf("read the members: %w", err)
	}
	for _, m := range ms {
		if m.ID == id {
			return m.Addr, nil
		}
	}
	return "", fmt.Errorf("the leader %s is not a live member", id)
}

// resign gives up l, bounded.
func (n *runner) resign(l coord.Leadership) {
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := l.Resign(rctx); err != nil && !errors.Is(err, coord.ErrNotLeader) {
		n.log.Warn("resign failed; leadership ends with the lease", "error", err)
	}
}

// lead runs one term.
func (n *runner) lead(ctx context.Context, c coord.Coordinator, l coord.Leadership) (done bool, err error) {
	finished, jobID, restore, err := n.jobRecord(ctx, c, l)
	lostCause := ""
	defer func() { n.cfg.Metrics.termEnded(lostCause) }()
	if err != nil {
		n.resign(l)
		if ctx.Err() != nil {
			return true, nil
		}
		n.log.Warn("cannot read the job record as leader; resigned, campaigning again", "error", err)
		n.pause(ctx)
		return false, nil
	}
	if finished {
		n.log.Info("the job is marked finished; nothing to run")
		n.resign(l)
		return true, nil
	}
	tctx, tcancel := context.WithCancelCause(ctx)
	defer tcancel(nil)
	lost := func(why error) { tcancel(fmt.Errorf("%w: %w", ErrLeadershipLost, why)) }
	stopWatch := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		n.watchTerm(l, c, lost, stopWatch)
	}()
	if restore != nil {
		n.log.Info("leading: restoring from the published checkpoint", "term", l.Term(), "job_id", jobID, "checkpoint", restore.ID, "location", restore.Location)
	} else {
		n.log.Info("leading: no checkpoint published; starting fresh", "term", l.Term(), "job_id", jobID)
	}
	jerr := n.cfg.Lead(tctx, Term{Leadership: l, Reader: c, JobID: jobID, Restore: restore, Lost: lost, Metrics: n.cfg.Metrics, Members: c.Members})
	if jerr != nil && ctx.Err() == nil && context.Cause(tctx) == nil {
		// Done channels are advisory: a job that failed because its term
		// ended (say, its producers were fenced by a successor) before
		// this node noticed must not count as a failed job. A fenced
		// rewrite of the job id asks the store.
		if err := l.Apply(ctx, coord.Put(StateJobID, []byte(jobID))); errors.Is(err, coord.ErrNotLeader) {
			lost(err)
		}
	}
	close(stopWatch)
	<-watched
	cause := context.Cause(tctx)
	switch {
	case ctx.Err() != nil:
		n.log.Info("stopping: job cancelled; output is committed up to the last published checkpoint")
		n.resign(l)
		return true, nil
	case errors.Is(cause, ErrLeadershipLost):
		lostCause = lostCauseOf(cause)
		n.log.Warn("lost leadership: job stopped; campaigning again", "cause", cause, "job_error", jerr)
		n.resign(l) // usually already gone; frees the election at once if not
		return false, nil
	case jerr != nil:
		n.log.Error("job failed; resigning", "error", jerr)
		n.resign(l)
		return true, jerr
	}
	if err := l.Apply(ctx, coord.Put(StateFinished, []byte(time.Now().UTC().Format(time.RFC3339)))); err != nil {
		n.log.Warn("job finished, but marking it finished failed (the next leader runs it again from its final checkpoint)", "error", err)
	} else {
		n.log.Info("job finished")
	}
	n.resign(l)
	return true, nil
}

// watchTerm calls lost when the leadership or the session ends, or when
// this process was paused (SIGSTOP, a stall of the machine) for longer than
// PauseLimit: its lease may be gone, and waiting for the store to say so
// would let the job write on meanwhile. It returns when stop is closed.
func (n *runner) watchTerm(l coord.Leadership, c coord.Coordinator, lost func(error), stop <-chan struct{}) {
	var tick <-chan time.Time
	if n.cfg.PauseLimit > 0 {
		every := min(n.cfg.PauseLimit/4, 100*time.Millisecond)
		t := time.NewTicker(every)
		defer t.Stop()
		tick = t.C
	}
	last := time.Now()
	for {
		select {
		case <-l.Done():
			select {
			case <-c.Done(): // the lease ended: the leadership with it
				lost(errSessionEnded)
			default:
				lost(errLeadershipEnded)
			}
			return
		case <-c.Done():
			lost(errSessionEnded)
			return
		case <-stop:
			return
		case now := <-tick:
			// Monotonic time: it includes the time the process was stopped.
			if gap := now.Sub(last); gap > n.cfg.PauseLimit {
				n.cfg.Metrics.pauseDetected()
				lost(fmt.Errorf("%w for %v, more than %v: its lease may have expired", errPaused, gap.Round(time.Millisecond), n.cfg.PauseLimit))
				return
			}
			last = now
		}
	}
}

// jobRecord reads (and on first use creates) the job record under l.
func (n *runner) jobRecord(ctx context.Context, c coord.Coordinator, l coord.Leadership) (finished bool, jobID string, restore *coord.CheckpointPointer, err error) {
	if _, ok, err := c.Get(ctx, StateFinished); err != nil {
		return false, "", nil, fmt.Errorf("read %s: %w", StateFinished, err)
	} else if ok {
		return true, "", nil, nil
	}
	b, ok, err := c.Get(ctx, StateJobID)
	if err != nil {
		return false, "", nil, fmt.Errorf("read %s: %w", StateJobID, err)
	}
	jobID = string(b)
	if !ok {
		jobID = n.cfg.NewJobID()
		if err := l.Apply(ctx, coord.Put(StateJobID, []byte(jobID))); err != nil {
			return false, "", nil, fmt.Errorf("record job id: %w", err)
		}
		n.log.Info("new job id recorded", "job_id", jobID)
	}
	p, ok, err := coord.LatestCheckpoint(ctx, c)
	if err != nil {
		return false, "", nil, err
	}
	if ok {
		restore = &p
	}
	return false, jobID, restore, nil
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
