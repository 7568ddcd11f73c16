package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
)

// This file holds the lease that keeps two live jobs from using one
// transactional id prefix. Kafka itself cannot tell who uses a
// transactional id (DescribeTransactions and DescribeProducers name
// producer ids and epochs, never a client), so every exactly-once sink
// joins a Kafka group named after its prefix, "sluice-lease.<prefix>",
// with the classic group protocol and its own protocol type (it is not a
// consumer group and consumes nothing). Its client id and member metadata
// name the job (id and name), host, pid and a nonce: the job's run id
// when the InitContext has one (the engine's: every process of one run —
// the coordinator's and its task hosts' in cluster mode — shares it, and
// another run of the same job id, in another process or under another
// cluster leader, has another), else a random one of the sink value.
// Before a writer fences or commits anything it joins the group and reads
// its members: any member with another nonce is another live sink on the
// same prefix (a member of a killed process is dropped by the broker when
// the join's rebalance times out, at most leaseRebalanceTimeout), and the
// writer refuses to start with ErrPrefixInUse naming both. While running,
// the lease heartbeats; a member that joins later is logged as an error
// and named in the error of a fenced producer.

const (
	leaseProtocolType     = "sluice-txn-lease"
	leaseSessionTimeout   = 10 * time.Second
	leaseRebalanceTimeout = 10 * time.Second
	leaseHeartbeat        = time.Second
)

// LeaseGroup returns the name of the Kafka group a sink with transactional
// id prefix holds while it runs: "sluice-lease.<prefix>". A principal
// needs READ and DESCRIBE on it (without them the sink logs a warning
// and runs without the check).
func LeaseGroup(prefix string) string { return "sluice-lease." + prefix }

// leaseMember is who holds a lease.
type leaseMember struct {
	Job     string `json:"job"`
	JobName string `json:"job_name,omitempty"`
	Sink    string `json:"sink,omitempty"`
	Host    string `json:"host,omitempty"`
	PID     int    `json:"pid,omitempty"`
	Nonce   string `json:"nonce"`
	Addr    string `json:"-"` // as the broker saw it
}

func (m leaseMember) String() string {
	s := fmt.Sprintf("job %s", m.Job)
	if m.JobName != "" {
		s += fmt.Sprintf(" (%q)", m.JobName)
	}
	if m.Sink != "" {
		s += fmt.Sprintf(" sink %q", m.Sink)
	}
	s += fmt.Sprintf(" on host %s pid %d", m.Host, m.PID)
	if m.Addr != "" {
		s += " from " + m.Addr
	}
	return s
}

// clientID encodes the member in the lease client's id, which the broker
// reports for every member whatever the group's state.
func (m leaseMember) clientID() string {
	b, _ := json.Marshal(m)
	return "sluice-lease" + string(b)
}

func parseLeaseClientID(id string) (leaseMember, bool) {
	rest, ok := strings.CutPrefix(id, "sluice-lease")
	if !ok {
		return leaseMember{}, false
	}
	var m leaseMember
	if json.Unmarshal([]byte(rest), &m) != nil || m.Nonce == "" {
		return leaseMember{}, false
	}
	return m, true
}

// leaseSet is a sink's leases, one per prefix, shared by its writers.
type leaseSet struct {
	nonce string
	mu    sync.Mutex
	held  map[string]*lease
}

func newLeaseSet() *leaseSet {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &leaseSet{nonce: hex.EncodeToString(b[:]), held: map[string]*lease{}}
}

// runIdentified is an InitContext that names the job's run (the
// engine's, engine.Job.RunID): the same in every process of one run.
type runIdentified interface{ RunID() string }

// nonceOf is the lease nonce of a writer: "run:" + the job id and run id
// of ictx when it has a run id, so that the writers of one run in several
// processes hold the lease together; else the sink value's random nonce.
func (ls *leaseSet) nonceOf(ictx sink.InitContext) string {
	if r, ok := ictx.(runIdentified); ok && r.RunID() != "" {
		return "run:" + ictx.JobID() + "/" + r.RunID()
	}
	return ls.nonce
}

// foreign returns the other members seen on the lease of prefix.
func (ls *leaseSet) foreign(prefix string) []leaseMember {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	var held []*lease
	for _, l := range ls.held {
		if l.prefix == prefix {
			held = append(held, l)
		}
	}
	ls.mu.Unlock()
	var out []leaseMember
	for _, l := range held {
		l.mu.Lock()
		out = append(out, l.others...)
		l.mu.Unlock()
	}
	return out
}

// leaseRef is one writer's hold on a lease.
type leaseRef struct {
	ls   *leaseSet
	l    *lease
	once sync.Once
}

func (r *leaseRef) release() {
	if r == nil {
		return
	}
	r.once.Do(func() { r.ls.drop(r.l) })
}

func (ls *leaseSet) drop(l *lease) {
	ls.mu.Lock()
	l.refs--
	last := l.refs == 0
	if last {
		delete(ls.held, l.key)
	}
	ls.mu.Unlock()
	if last {
		l.stop()
	}
}

type lease struct {
	prefix, group string
	key           string // in leaseSet.held: prefix and nonce
	me            leaseMember
	cl            *kgo.Client
	log           *slog.Logger
	refs          int // under leaseSet.mu

	memberID string
	gen      int32
	cancel   context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	others []leaseMember // foreign members seen while running
}

// ErrPrefixInUse is wrapped by the error of a sink that finds another live
// sink holding the lease of its transactional id prefix. The message
// names both (job id and name, host, pid). It also wraps
// restart.ErrUnrecoverable: restarting does not help.
var ErrPrefixInUse = errors.New("kafka: transactional id prefix in use by another live job")

// acquire joins the lease of prefix (or shares the one the sink already
// holds) and fails with ErrPrefixInUse when another live sink holds it.
func (ls *leaseSet) acquire(ctx context.Context, prefix string, ictx sink.InitContext, opts []kgo.Opt, log *slog.Logger) (*leaseRef, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	nonce := ls.nonceOf(ictx)
	key := prefix + "\x00" + nonce
	if l := ls.held[key]; l != nil {
		l.refs++
		return &leaseRef{ls: ls, l: l}, nil
	}
	host, _ := os.Hostname()
	me := leaseMember{Job: ictx.JobID(), JobName: ictx.JobName(), Sink: ictx.OperatorName(), Host: host, PID: os.Getpid(), Nonce: nonce}
	l := &lease{prefix: prefix, key: key, group: LeaseGroup(prefix), me: me, log: log.With("prefix", prefix, "group", LeaseGroup(prefix))}
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.ClientID(me.clientID()))...)
	if err != nil {
		return nil, fmt.Errorf("%w: lease client: %w", ErrInvalidConfig, err)
	}
	l.cl = cl
	others, err := l.join(ctx)
	if err != nil {
		cl.Close()
		if isAuthErr(err) {
			l.log.Warn("kafka sink: cannot hold the lease of the transactional id prefix (no ACL for its group; grant READ and DESCRIBE on it): another live job with this prefix will not be detected at start, only when it fences this one",
				"err", err)
			l.cl = nil
			l.refs = 1
			ls.held[key] = l
			return &leaseRef{ls: ls, l: l}, nil
		}
		return nil, fmt.Errorf("join lease group %q of prefix %q: %w", l.group, prefix, err)
	}
	if len(others) > 0 {
		l.leave()
		cl.Close()
		return nil, prefixInUse(prefix, me, others)
	}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel, l.done = cancel, make(chan struct{})
	go l.run(lctx)
	l.refs = 1
	ls.held[key] = l
	return &leaseRef{ls: ls, l: l}, nil
}

func prefixInUse(prefix string, me leaseMember, others []leaseMember) error {
	names := make([]string, len(others))
	for i, o := range others {
		names[i] = o.String()
	}
	return fmt.Errorf("%w: %w: transactional id prefix %q (lease group %q) is held by %s; this is %s. Two live jobs with one prefix fence each other's transactions and lose data: stop the other job, or give this one another prefix (the default prefix is unique per job)",
		restart.ErrUnrecoverable, ErrPrefixInUse, prefix, LeaseGroup(prefix), strings.Join(names, " and "), me)
}

// join joins (or rejoins) the group, completes the rebalance and returns
// the live members that are not this sink. It retries while the
// coordinator moves or loads, bounded by ctx (the writer's SetupTimeout).
func (l *lease) join(ctx context.Context) ([]leaseMember, error) {
	meta, _ := json.Marshal(l.me)
	backoff := txnInitialBackoff
	pause := func(err error) error {
		if werr := sleepCtx(ctx, backoff); werr != nil {
			return errors.Join(err, werr)
		}
		backoff = min(2*backoff, txnMaxBackoff)
		return nil
	}
	for {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group = l.group
		req.SessionTimeoutMillis = int32(leaseSessionTimeout / time.Millisecond)
		req.RebalanceTimeoutMillis = int32(leaseRebalanceTimeout / time.Millisecond)
		req.MemberID = l.memberID
		req.ProtocolType = leaseProtocolType
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "lease", meta
		req.Protocols = append(req.Protocols, p)
		resp, err := req.RequestWith(ctx, l.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		switch {
		case errors.Is(err, kerr.MemberIDRequired):
			l.memberID = resp.MemberID
			continue
		case errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration):
			l.memberID = ""
			continue
		case errors.Is(err, kerr.RebalanceInProgress) || (err != nil && retriableTxnErr(err)):
			if perr := pause(err); perr != nil {
				return nil, perr
			}
			continue
		case err != nil:
			return nil, err
		}
		l.memberID, l.gen = resp.MemberID, resp.Generation
		var others []leaseMember
		if resp.LeaderID == resp.MemberID {
			for _, m := range resp.Members {
				if o, ok := l.foreignMember(m.MemberID, "", "", m.ProtocolMetadata); ok {
					others = append(others, o)
				}
			}
		}
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Group, sreq.Generation, sreq.MemberID = l.group, l.gen, l.memberID
		pt, pn := leaseProtocolType, "lease"
		sreq.ProtocolType, sreq.Protocol = &pt, &pn
		sresp, err := sreq.RequestWith(ctx, l.cl)
		if err == nil {
			err = kerr.ErrorForCode(sresp.ErrorCode)
		}
		if errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || (err != nil && retriableTxnErr(err)) {
			if errors.Is(err, kerr.UnknownMemberID) {
				l.memberID = ""
			}
			if perr := pause(err); perr != nil {
				return nil, perr
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		described, err := l.describe(ctx)
		if err != nil {
			return nil, err
		}
		for _, d := range described {
			if !slices.ContainsFunc(others, func(o leaseMember) bool { return o.Nonce == d.Nonce }) {
				others = append(others, d)
			}
		}
		return others, nil
	}
}

// describe returns the group's members other than this sink.
func (l *lease) describe(ctx context.Context) ([]leaseMember, error) {
	var out []leaseMember
	err := retry(ctx, func() error {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{l.group}
		resp, err := req.RequestWith(ctx, l.cl)
		if err != nil {
			return err
		}
		out = nil
		for _, g := range resp.Groups {
			if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
				return err
			}
			for _, m := range g.Members {
				if o, ok := l.foreignMember(m.MemberID, m.ClientID, m.ClientHost, m.ProtocolMetadata); ok {
					out = append(out, o)
				}
			}
		}
		return nil
	})
	return out, err
}

// foreignMember decodes a member and reports whether it is another sink.
func (l *lease) foreignMember(memberID, clientID, addr string, meta []byte) (leaseMember, bool) {
	if memberID == l.memberID {
		return leaseMember{}, false
	}
	m, ok := parseLeaseClientID(clientID)
	if !ok && json.Unmarshal(meta, &m) != nil {
		m = leaseMember{Job: "unknown (client id " + clientID + ")"}
	}
	m.Addr = strings.TrimPrefix(addr, "/")
	return m, m.Nonce != l.me.Nonce
}

// run heartbeats until ctx is done, rejoining after rebalances; foreign
// members seen on a rejoin are logged and remembered.
func (l *lease) run(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(leaseHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req := kmsg.NewPtrHeartbeatRequest()
		req.Group, req.Generation, req.MemberID = l.group, l.gen, l.memberID
		resp, err := req.RequestWith(ctx, l.cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if errors.Is(err, kerr.UnknownMemberID) {
			l.memberID = ""
		}
		if !errors.Is(err, kerr.RebalanceInProgress) && !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.IllegalGeneration) {
			l.log.Debug("kafka sink: lease heartbeat failed", "err", err)
			continue
		}
		jctx, cancel := context.WithTimeout(ctx, 2*leaseRebalanceTimeout)
		others, err := l.join(jctx)
		cancel()
		if err != nil {
			l.log.Debug("kafka sink: lease rejoin failed", "err", err)
			continue
		}
		l.mu.Lock()
		for _, o := range others {
			if !slices.ContainsFunc(l.others, func(x leaseMember) bool { return x.Nonce == o.Nonce }) {
				l.others = append(l.others, o)
				l.log.Error("kafka sink: another sink joined the lease of this transactional id prefix; it should refuse to start, but if it does not, the two fence each other and lose data",
					"other", o.String(), "this", l.me.String())
			}
		}
		l.mu.Unlock()
	}
}

func (l *lease) leave() {
	if l.cl == nil || l.memberID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group, req.MemberID = l.group, l.memberID
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = l.memberID
	req.Members = append(req.Members, m)
	_, _ = req.RequestWith(ctx, l.cl)
}

func (l *lease) stop() {
	if l.cl == nil {
		return
	}
	l.cancel()
	<-l.done
	l.leave()
	l.cl.Close()
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
