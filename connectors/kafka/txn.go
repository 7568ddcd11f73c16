package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the raw transaction requests that let any client finish a
// transaction another client prepared: EndTxn with the (transactional id,
// producer id, epoch) of a committable, and InitProducerID on a
// transactional id to fence and abort whatever transaction it left open.

// committable is a prepared Kafka transaction: everything one writer subtask
// produced during one checkpoint interval. Any client can commit it with an
// EndTxn request carrying these fields.
type committable struct {
	TransactionalID string `json:"txn_id"`
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	// Checkpoint is the checkpoint the transaction was prepared at.
	Checkpoint int64 `json:"checkpoint"`
	// Started is when the writer began the transaction (Unix ms; 0 in
	// committables written before it existed). The broker aborts a
	// transaction TransactionTimeout after its start.
	Started int64 `json:"started_ms,omitempty"`
}

func (c committable) String() string {
	return fmt.Sprintf("%s (producer %d, epoch %d, checkpoint %d)", c.TransactionalID, c.ProducerID, c.Epoch, c.Checkpoint)
}

// Bounded retry policy for coordinator requests.
const (
	txnRequestAttempts = 40
	txnInitialBackoff  = 20 * time.Millisecond
	txnMaxBackoff      = time.Second
)

// retriableTxnErr reports errors after which the same request may be sent
// again: the coordinator is moving, loading, or finishing an earlier end.
func retriableTxnErr(err error) bool {
	return errors.Is(err, kerr.ConcurrentTransactions) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) ||
		errors.Is(err, kerr.NotCoordinator) ||
		errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.RequestTimedOut) ||
		errors.Is(err, kerr.NotEnoughReplicas) ||
		errors.Is(err, kerr.NotEnoughReplicasAfterAppend) ||
		isNetErr(err) ||
		(kerr.IsRetriable(err) && !isTxnGone(err))
}

// isNetErr reports connection failures (a broker restarting).
func isNetErr(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// isTxnGone reports errors that say the transaction with this producer
// epoch is no longer open: it was committed or aborted, or its id was
// re-initialized since.
func isTxnGone(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidProducerIDMapping) ||
		errors.Is(err, kerr.InvalidTxnState) ||
		errors.Is(err, kerr.TransactionalIDNotFound)
}

// retry runs fn until it succeeds, fails with a non-retriable error, ctx is
// done or the attempts run out.
func retry(ctx context.Context, fn func() error) error {
	backoff := txnInitialBackoff
	var err error
	for range txnRequestAttempts {
		if err = fn(); err == nil || !retriableTxnErr(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		backoff = min(2*backoff, txnMaxBackoff)
	}
	return fmt.Errorf("gave up after %d attempts: %w", txnRequestAttempts, err)
}

// endTxn commits (or aborts) the transaction of c from any client.
func endTxn(ctx context.Context, cl *kgo.Client, c committable, commit bool) error {
	return retry(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = c.TransactionalID
		req.ProducerID = c.ProducerID
		req.ProducerEpoch = c.Epoch
		req.Commit = commit
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// fenceTxnID initializes a producer id for txnID, which fences every earlier
// producer of that id and aborts the transaction it left open. It waits
// (bounded) while the coordinator finishes an earlier end.
func fenceTxnID(ctx context.Context, cl *kgo.Client, txnID string, timeout time.Duration) error {
	return retry(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = int32(timeout / time.Millisecond)
		req.ProducerID = -1
		req.ProducerEpoch = -1
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		return kerr.ErrorForCode(resp.ErrorCode)
	})
}

// fenceParallel bounds the InitProducerID requests fenceTxnIDs has in
// flight at once.
const fenceParallel = 8

// fenceTxnIDs fences every id (fenceTxnID), up to fenceParallel at once:
// each is two round trips (FindCoordinator, InitProducerID) and a writer's
// start fences all its slots, so one after another they were most of a
// sink's start-up. It returns the first id, in the order given, that
// failed, with its error.
func fenceTxnIDs(ctx context.Context, cl *kgo.Client, ids []string, timeout time.Duration) (string, error) {
	if len(ids) == 1 {
		return ids[0], fenceTxnID(ctx, cl, ids[0], timeout)
	}
	errs := make([]error, len(ids))
	sem := make(chan struct{}, fenceParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fenceTxnID(ctx, cl, id, timeout)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return ids[i], err
		}
	}
	return "", nil
}

// txnID names slot k of subtask s: "<prefix>-<s>-<k>".
func txnID(prefix string, subtask, slot int) string {
	return prefix + "-" + strconv.Itoa(subtask) + "-" + strconv.Itoa(slot)
}

// parseTxnID returns the subtask and slot of an id made by txnID.
func parseTxnID(prefix, id string) (subtask, slot int, ok bool) {
	rest, found := strings.CutPrefix(id, prefix+"-")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "-")
	if !found {
		return 0, 0, false
	}
	s, err1 := strconv.Atoi(a)
	k, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || s < 0 || k < 0 {
		return 0, 0, false
	}
	return s, k, true
}

// backchannel tells writers which of their prepared transactions committers
// in the same process have committed, so that a writer reuses a
// transactional id only once its transaction is committed (Flink's pooling
// naming strategy does the same through its writer–committer backchannel).
// It is safe for concurrent use.
//
// It also remembers which transactions this process prepared, so that a
// transaction that was prepared here and is found gone after a failover
// within the same run is taken for what it is, a fence (another producer
// took the id over, or the broker aborted it), and fails the job as it
// would have without the failover. Only a transaction of an earlier run
// (a resume with --from) is judged by the evidence a restore has
// (judgeGone).
type backchannel struct {
	mu        sync.Mutex
	committed map[string]committable // by transactional id: the last committed
	verdicts  map[committable]verdict
	prepared  map[string]int64 // by transactional id: the checkpoint of the first transaction prepared here
}

func newBackchannel() *backchannel {
	return &backchannel{committed: map[string]committable{}, verdicts: map[committable]verdict{}, prepared: map[string]int64{}}
}

// markPrepared records that this process prepared c.
func (b *backchannel) markPrepared(c committable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.prepared[c.TransactionalID]; !ok {
		b.prepared[c.TransactionalID] = c.Checkpoint
	}
}

// preparedHere reports whether c was prepared by this process: checkpoint
// ids only grow within a run, and every transaction of an earlier run
// belongs to a checkpoint at or before the one this run restored, before
// any it prepares.
func (b *backchannel) preparedHere(c committable) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	first, ok := b.prepared[c.TransactionalID]
	return ok && c.Checkpoint >= first
}

// judge records and logs, once per committable, what recovery concluded
// about a restored transaction that can no longer be committed.
func (b *backchannel) judge(c committable, log *slog.Logger, v verdict) {
	b.mu.Lock()
	_, seen := b.verdicts[c]
	b.verdicts[c] = v
	b.mu.Unlock()
	if !v.lost {
		b.markCommitted(c)
	}
	if seen {
		return
	}
	switch {
	case v.lost:
		log.Error("kafka sink: restored transaction was not committed and its records are lost", "txn", c.String(), "err", v.err)
	case v.certain:
		log.Info("kafka sink: restored transaction was already committed", "txn", c.String(), "reason", v.reason)
	default:
		log.Warn("kafka sink: restored transaction is no longer open and the broker cannot say how it ended; taking it as committed", "txn", c.String(), "reason", v.reason)
	}
}

func (b *backchannel) verdictOf(c committable) *verdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.verdicts[c]; ok {
		return &v
	}
	return nil
}

func (b *backchannel) markCommitted(c committable) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.committed[c.TransactionalID]; ok && (old.ProducerID == c.ProducerID && old.Epoch > c.Epoch) {
		return
	}
	b.committed[c.TransactionalID] = c
}

func (b *backchannel) isCommitted(c committable) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, ok := b.committed[c.TransactionalID]
	return ok && old.ProducerID == c.ProducerID && old.Epoch == c.Epoch
}
