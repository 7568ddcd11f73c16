package kafka

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-io/sluice/restart"
)

// This file decides what a "gone" answer to the commit of a transaction
// means, and words the errors of fenced producers.
//
// What Apache Kafka 4.x (transaction protocol v2, KIP-890) answers to an
// EndTxn commit carrying the producer id and epoch of a prepared
// transaction (verified against the real broker, TestEndTxnAnswers):
//
//   - the transaction is open: it commits; success.
//   - it was committed and nothing has used the transactional id since:
//     success again (the coordinator takes it as a retry).
//   - it was aborted (EndTxn abort, by a producer or a tool) and nothing
//     has used the id since: INVALID_TXN_STATE.
//   - the id moved on since (a producer initialized it, which aborts an
//     open transaction, or a later transaction began): PRODUCER_FENCED,
//     whether the transaction had been committed or aborted. The
//     broker's state (DescribeTransactions: pid, epoch, state) looks the
//     same in both cases, and the epoch grows by the same amount.
//
// So after a restore the broker can prove a commit (success) and an abort
// (INVALID_TXN_STATE), but PRODUCER_FENCED needs other evidence:
//
//   - the restored writer state lists the transaction as seen committed
//     (writerState.Committed): committed, certain;
//   - the transaction started more than TransactionTimeout ago: the
//     broker may have aborted it, unless it was committed first — counted
//     as lost (error);
//   - otherwise the only producers that move an id of this job's prefix on
//     are this job's own (a writer reuses an id only after its
//     transaction is committed; recovery fences an id only after
//     committing what the checkpoint holds for it) and another job on the
//     same prefix, which the lease refuses: taken as committed, with a
//     warning, since it cannot be proven.

// verdict is what recovery concluded about a transaction it could not
// commit.
type verdict struct {
	lost    bool
	certain bool
	reason  string
	err     error // when lost
}

// judgeGone decides about a restored transaction whose commit answered
// err (an isTxnGone error). others are other sinks seen on the prefix's
// lease.
func judgeGone(c committable, err error, now time.Time, timeout time.Duration, others []leaseMember) verdict {
	if errors.Is(err, kerr.InvalidTxnState) {
		return verdict{lost: true, certain: true, reason: "the broker says it was aborted",
			err: fmt.Errorf("kafka sink: transaction %v was aborted before it could be committed (the broker answers the commit with %w): its records are lost", c, err)}
	}
	if len(others) > 0 {
		return verdict{lost: true, reason: "another sink holds this prefix",
			err: fmt.Errorf("kafka sink: transaction %v can no longer be committed and %s also uses its prefix: it was probably fenced and its records lost: %w", c, joinMembers(others), err)}
	}
	if c.Started > 0 {
		age := now.Sub(time.UnixMilli(c.Started))
		if age >= timeout {
			return verdict{lost: true, reason: "older than the transaction timeout",
				err: fmt.Errorf("kafka sink: transaction %v started %v ago, longer than the transaction timeout %v: the broker aborted it unless the previous run committed it first, and cannot say which; its records may be lost: %w", c, age.Round(time.Second), timeout, err)}
		}
		return verdict{reason: fmt.Sprintf("started %v ago, within the transaction timeout %v, and no other sink holds the prefix: only this job moves its ids on, after committing; it is lost only if the previous run failed with %q (%v)", age.Round(time.Millisecond), timeout, ErrFenced, err)}
	}
	return verdict{reason: fmt.Sprintf("no other sink holds the prefix: only this job moves its ids on, after committing; it is lost only if the previous run failed with %q (%v)", ErrFenced, err)}
}

func joinMembers(ms []leaseMember) string {
	s := make([]string, len(ms))
	for i, m := range ms {
		s[i] = m.String()
	}
	return strings.Join(s, " and ")
}

// ErrFenced is wrapped by the error of an exactly-once writer or committer
// whose transaction another producer aborted by taking over its
// transactional id (or the broker aborted after the transaction
// timeout). It also wraps restart.ErrUnrecoverable: the job fails at once,
// since a restart would fence the other producer in turn.
var ErrFenced = errors.New("kafka: transactional producer fenced")

// isFenced reports the errors a producer gets once another producer
// initialized its transactional id.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) || errors.Is(err, kerr.TransactionalIDNotFound)
}

func fencedError(txnID string, others []leaseMember, timeout time.Duration, err error) error {
	who := "another producer (another job with the same TransactionalIDPrefix, or a copy of this job)"
	if len(others) > 0 {
		who = joinMembers(others)
	}
	return fmt.Errorf("%w: %w: %s took over transactional id %q, or the broker aborted its transaction after the transaction timeout %v; what it held is lost: %w",
		restart.ErrUnrecoverable, ErrFenced, who, txnID, timeout, err)
}

func (w *writer[T]) fencedError(txnID string, err error) error {
	return fencedError(txnID, w.s.leases.foreign(w.prefix), w.s.cfg.txnTimeout, err)
}

func fencedCommitError(c committable, err error, timeout time.Duration, ls *leaseSet) error {
	return fmt.Errorf("kafka sink: commit %v of a completed checkpoint: %w", c, fencedError(c.TransactionalID, ls.foreignAll(), timeout, err))
}

// foreignAll returns the other members seen on every lease of the sink.
func (ls *leaseSet) foreignAll() []leaseMember {
	if ls == nil {
		return nil
	}
	ls.mu.Lock()
	held := make([]*lease, 0, len(ls.held))
	for _, l := range ls.held {
		held = append(held, l)
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
