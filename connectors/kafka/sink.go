package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/sink/leftover"
)

// Guarantee is a sink's delivery guarantee.
type Guarantee int

const (
	// None hands records to the client and never waits for them except at
	// the end of input: records may be lost on failure.
	None Guarantee = iota
	// AtLeastOnce flushes the producer at every checkpoint: nothing is lost,
	// records may be written twice after a failure.
	AtLeastOnce
	// ExactlyOnce writes each checkpoint interval of each subtask in one
	// Kafka transaction, committed when the checkpoint completes.
	// read_committed consumers see every record once.
	ExactlyOnce
)

func (g Guarantee) String() string {
	switch g {
	case None:
		return "none"
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return "Guarantee(" + strconv.Itoa(int(g)) + ")"
}

// SinkOption configures a sink; see the functions that return one.
type SinkOption interface{ apply(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) apply(c *sinkConfig) { f(c) }

type sinkConfig struct {
	brokers      []string
	topic        string
	guarantee    Guarantee
	prefix       string
	slots        int
	txnTimeout   time.Duration
	flushTimeout time.Duration
	setupTimeout time.Duration
	connTimeout  time.Duration
	linger       time.Duration
	allowance    time.Duration
	maxBuffered  int
	acks         Acks        // 0 = by guarantee
	compression  Compression // "" = franz-go's default
	partitioner  Partitioner // "" = franz-go's default
	create       *topicCreation
	clientOpts   []kgo.Opt
	logger       *slog.Logger
}

// defaultSinkConfig holds every sink default.
func defaultSinkConfig() sinkConfig {
	return sinkConfig{
		guarantee:    AtLeastOnce,
		slots:        5,
		txnTimeout:   10 * time.Minute,
		flushTimeout: 2 * time.Minute,
		setupTimeout: 2 * time.Minute,
		connTimeout:  DefaultConnectTimeout,
		linger:       0,
		allowance:    DefaultRestartAllowance,
		maxBuffered:  DefaultMaxBufferedRecords,
		logger:       slog.Default(),
	}
}

func (c *sinkConfig) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: sink: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case len(c.brokers) == 0:
		return bad("no brokers: pass at least one host:port")
	case c.guarantee < None || c.guarantee > ExactlyOnce:
		return bad("DeliveryGuarantee is %v; allowed: None, AtLeastOnce, ExactlyOnce", c.guarantee)
	case c.maxBuffered < 1:
		return bad("MaxBufferedRecords is %d; must be at least 1", c.maxBuffered)
	case c.slots < 2 || c.slots > 64:
		return bad("TransactionSlots is %d; allowed: 2 to 64", c.slots)
	case c.txnTimeout < time.Second || c.txnTimeout > 24*time.Hour:
		return bad("TransactionTimeout is %v; allowed: 1s to 24h (and at most the broker's transaction.max.timeout.ms)", c.txnTimeout)
	case c.flushTimeout <= 0:
		return bad("FlushTimeout is %v; must be positive", c.flushTimeout)
	case c.setupTimeout <= 0:
		return bad("SetupTimeout is %v; must be positive", c.setupTimeout)
	case c.connTimeout <= 0:
		return bad("ConnectTimeout is %v; must be positive", c.connTimeout)
	case c.allowance < 0:
		return bad("RestartAllowance is %v; must be >= 0", c.allowance)
	}
	for _, b := range c.brokers {
		if b == "" {
			return bad("empty broker address")
		}
	}
	return c.validateProducer()
}

// DefaultTopic sets the topic of records whose serializer leaves Topic
// empty. There is no default: without it every record needs a topic.
func DefaultTopic(topic string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.topic = topic })
}

// DeliveryGuarantee sets the sink's guarantee (default AtLeastOnce).
func DeliveryGuarantee(g Guarantee) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.guarantee = g })
}

// TransactionalIDPrefix names the sink's transactional ids,
// "<prefix>-<subtask>-<slot>". It must be unique per sink among all jobs
// writing to the cluster and stay the same across restarts: recovery
// aborts lingering transactions of this prefix.
//
// The default, [DefaultTransactionalIDPrefix], is
// "sluice-<job id>-<sink operator name>": unique per job (the job id is
// created at the job's first start) and stable across restarts and
// restores (the job id is kept in every checkpoint and savepoint). Set it
// only when something outside the job must know the ids (ACLs on a
// prefix). Two live jobs that use one prefix are detected (see
// [ErrPrefixInUse]) and fail.
func TransactionalIDPrefix(p string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.prefix = p })
}

// DefaultTransactionalIDPrefix is the prefix an exactly-once sink uses
// when [TransactionalIDPrefix] is not set: "sluice-<job id>-<operator>",
// where operator is the sink operator's uid (its name unless the runtime
// gives it a uid) with every character outside [A-Za-z0-9._-] replaced by
// "_". It returns "" when ictx has no job id.
func DefaultTransactionalIDPrefix(ictx sink.InitContext) string {
	if ictx.JobID() == "" {
		return ""
	}
	return "sluice-" + ictx.JobID() + "-" + sanitizeName(ictx.OperatorUID())
}

// sanitizeName keeps [A-Za-z0-9._-] and replaces every other rune by "_".
func sanitizeName(s string) string {
	b := []byte{}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b = append(b, byte(r))
		default:
			b = append(b, '_')
		}
	}
	return string(b)
}

// TransactionSlots sets how many transactional ids each subtask cycles
// through (default 5, 2 to 64). A slot is reused once its transaction is
// committed; a writer whose every slot still waits for its commit fails
// with ErrNoFreeTransactionSlot.
func TransactionSlots(n int) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.slots = n }) }

// TransactionTimeout sets the producers' transaction timeout (default
// 10m). It must not exceed the broker's transaction.max.timeout.ms (checked
// at start) and should exceed checkpoint interval plus recovery time (a
// writer logs a warning at start otherwise; see [RestartAllowance]): a
// prepared transaction older than this is aborted by the broker, which
// loses its records.
func TransactionTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.txnTimeout = d })
}

// DefaultRestartAllowance is the default of [RestartAllowance].
const DefaultRestartAllowance = time.Minute

// RestartAllowance sets how long the sink expects a failure and restart
// to take, from the last prepare to the recovery commit (default
// [DefaultRestartAllowance], 1m). An exactly-once writer logs a warning at
// start when TransactionTimeout is shorter than the job's checkpoint
// interval plus this allowance: a prepared transaction must outlive the
// next checkpoint and a restart, or the broker aborts it and its records
// are lost. It only sets the warning's threshold.
func RestartAllowance(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.allowance = d })
}

// FlushTimeout bounds how long a checkpoint waits for buffered records to
// be acknowledged (default 2m). Cancelling the job ends the wait at once.
func FlushTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.flushTimeout = d })
}

// SetupTimeout bounds a writer's start: reaching the brokers, taking the
// prefix's lease, committing restored transactions and aborting lingering
// ones (default 2m). Cancelling the job ends the start at once.
func SetupTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.setupTimeout = d })
}

// SinkConnectTimeout bounds how long a writer goes on when it can reach
// no broker (default [DefaultConnectTimeout], 30s): no connection opens
// and no request is answered. A broker that cannot be reached is logged
// at once (WARN, naming host:port and node), again at most every 10s with
// how long it has been down, and a line is logged when it is back; once
// nothing could be reached for this long, the writer's start, flush or
// write fails with an *UnreachableError (ErrBrokersUnreachable) and the
// job restarts as its restart strategy says.
func SinkConnectTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.connTimeout = d })
}

// DefaultMaxBufferedRecords is the sink's default MaxBufferedRecords,
// franz-go's own default.
const DefaultMaxBufferedRecords = 10_000

// MaxBufferedRecords sets how many records one producer (one per
// transactional slot, or one per writer without ExactlyOnce) holds
// produced but not yet acknowledged; Write waits when it is reached
// (default DefaultMaxBufferedRecords, 10,000: at 100-byte records about
// 10 ms of a million records a second, enough to keep every partition's
// batch full). A larger buffer does not make the copy faster: measured on
// the Kafka benchmark, 100,000 cost 50–80 MB more peak memory per writer
// (a buffered record keeps its whole fetched batch alive) and no less CPU
// per record (bench/kafka/README.md). n must be at least 1.
func MaxBufferedRecords(n int) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.maxBuffered = n })
}

// ProducerLinger sets how long the producer waits to fill batches (default
// 0: send as soon as possible).
func ProducerLinger(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.linger = d })
}

// SinkClientOpts adds franz-go client options (TLS, SASL, compression,
// …) to every client of the sink; see also [SASLPlain], [SASLScram] and
// [TLS]. Default: none (plaintext, no authentication).
func SinkClientOpts(opts ...kgo.Opt) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.clientOpts = append(c.clientOpts, opts...) })
}

// SinkLogger sets the logger (default slog.Default()).
func SinkLogger(l *slog.Logger) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.logger = l })
}

// writerState is what an exactly-once writer keeps in checkpoints: its
// subtask and the transactions it prepared that it has not seen committed.
type writerState struct {
	Subtask     int           `json:"subtask"`
	Parallelism int           `json:"parallelism"`
	Pending     []committable `json:"pending,omitempty"`
	// Committed are transactions this writer saw committed whose commit
	// the runtime may not have recorded yet (the last one of each slot):
	// a restore that finds one of them no longer open knows it was
	// committed, not lost. Absent in states written before it existed.
	Committed []committable `json:"committed,omitempty"`
	// Prefix is the transactional id prefix the writer used (absent in
	// older states).
	Prefix string `json:"prefix,omitempty"`
}

var (
	committableSerde = serde.JSON[committable](1)
	writerStateSerde = serde.JSON[writerState](1)
)

// kafkaSink writes records to Kafka; [NewSink] returns it wrapped as a
// sink.Sink.
type kafkaSink[T any] struct {
	cfg  sinkConfig
	ser  Serializer[T]
	rser RecordSerializer[T] // ser, if it implements it
	// recs holds zeroed records for Serialize: a record is put back by
	// its produce promise, after which franz-go no longer touches it.
	recs   sync.Pool
	bc     *backchannel
	leases *leaseSet

	checkOnce sync.Once
	checkErr  error
	warnOnce  sync.Once
}

// NewSink returns a Kafka sink for the brokers (host:port) with the given
// serializer. With ExactlyOnce the result is a two-phase sink
// (sink.NewStatefulTwoPhase); otherwise a plain one. Configuration errors
// wrap ErrInvalidConfig and name the option.
func NewSink[T any](brokers []string, ser Serializer[T], opts ...SinkOption) (sink.Sink[T], error) {
	cfg := defaultSinkConfig()
	cfg.brokers = slices.Clone(brokers)
	for _, o := range opts {
		o.apply(&cfg)
	}
	if ser == nil {
		return nil, fmt.Errorf("%w: sink: serializer is nil", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &kafkaSink[T]{cfg: cfg, ser: ser, bc: newBackchannel(), leases: newLeaseSet()}
	s.rser, _ = ser.(RecordSerializer[T])
	if cfg.guarantee == ExactlyOnce {
		return sink.NewStatefulTwoPhase[T, committable, writerState](s), nil
	}
	return plainSink[T]{s}, nil
}

type plainSink[T any] struct{ s *kafkaSink[T] }

func (p plainSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, err := p.s.newWriter(ctx, ic, nil, false)
	if w == nil {
		return nil, err
	}
	return w, err
}

func (s *kafkaSink[T]) baseOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(s.cfg.brokers...), kgo.WithLogger(nil)}
	return append(opts, s.cfg.clientOpts...)
}

func (s *kafkaSink[T]) producerOpts(txnID string) []kgo.Opt {
	opts := append(s.baseOpts(),
		kgo.ProducerLinger(s.cfg.linger),
		kgo.MaxBufferedRecords(s.cfg.maxBuffered),
		// No kgo.RecordDeliveryTimeout: franz-go measures it from each
		// record's Timestamp, which the sink sets to the input record's
		// event time, so input older than the timeout would fail at once
		// and future-dated input would never time out. Delivery is
		// bounded instead by FlushTimeout (every checkpoint and the end of
		// input flush with it) and, for transactions, by the transaction
		// timeout.
	)
	opts = append(opts, s.cfg.producerSettings()...)
	if s.cfg.guarantee == ExactlyOnce {
		opts = append(opts, kgo.TransactionalID(txnID), kgo.TransactionTimeout(s.cfg.txnTimeout))
	}
	return opts
}

// CreateWriter makes the writer of one subtask (fresh start). ctx bounds
// its start (reaching the brokers, the prefix's lease, aborting lingering
// transactions), together with SetupTimeout.
func (s *kafkaSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	return orNil(s.newWriter(ctx, ic, nil, false))
}

// RestoreWriter makes a writer from the states of a completed checkpoint:
// it commits the transactions they list, then aborts lingering ones.
func (s *kafkaSink[T]) RestoreWriter(ctx context.Context, ic sink.InitContext, states []writerState) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	return orNil(s.newWriter(ctx, ic, states, true))
}

// orNil returns w as an interface, a nil one when w is nil.
func orNil[T any](w *writer[T], err error) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	if w == nil {
		return nil, err
	}
	return w, err
}

// CreateCommitter makes the committer of one subtask.
func (s *kafkaSink[T]) CreateCommitter(ctx context.Context, ic sink.InitContext) (sink.Committer[committable], error) {
	return &committer{s: s.cfg, opts: s.baseOpts(), bc: s.bc, leases: s.leases,
		log: s.cfg.logger.With("sink", ic.OperatorName(), "subtask", ic.SubtaskIndex())}, nil
}

// CommittableSerializer stores committables as JSON, version 1.
func (s *kafkaSink[T]) CommittableSerializer() serde.Versioned[committable] { return committableSerde }

// WriterStateSerializer stores writer states as JSON, version 1.
func (s *kafkaSink[T]) WriterStateSerializer() serde.Versioned[writerState] { return writerStateSerde }

// checkTransactionTimeout compares the transaction timeout with the
// broker's transaction.max.timeout.ms, once per sink.
func (s *kafkaSink[T]) checkTransactionTimeout(ctx context.Context, cl *kgo.Client) error {
	s.checkOnce.Do(func() {
		adm := kadm.NewClient(cl)
		rcs, err := adm.DescribeBrokerConfigs(ctx)
		if err != nil {
			s.cfg.logger.Debug("kafka sink: cannot describe broker configs; transaction timeout unchecked", "err", err)
			return
		}
		for _, rc := range rcs {
			if rc.Err != nil {
				continue
			}
			for _, c := range rc.Configs {
				if c.Key != "transaction.max.timeout.ms" || c.Value == nil {
					continue
				}
				maxMS, perr := strconv.ParseInt(*c.Value, 10, 64)
				if perr == nil && s.cfg.txnTimeout > time.Duration(maxMS)*time.Millisecond {
					s.checkErr = fmt.Errorf("%w: TransactionTimeout %v exceeds the broker's transaction.max.timeout.ms (%s = %d ms): lower it or raise the broker's limit",
						ErrTransactionTimeout, s.cfg.txnTimeout, rc.Name, maxMS)
				}
				return
			}
		}
	})
	return s.checkErr
}

// warnTransactionTimeout logs a warning, once per sink, when the
// transaction timeout is shorter than the checkpoint interval plus the
// restart allowance. With periodic checkpoints off (interval 0) there is
// no interval to compare with and nothing is logged.
func (s *kafkaSink[T]) warnTransactionTimeout(interval time.Duration, prefix string) {
	if interval <= 0 || s.cfg.txnTimeout >= interval+s.cfg.allowance {
		return
	}
	s.warnOnce.Do(func() {
		s.cfg.logger.Warn("kafka sink: TransactionTimeout is shorter than the checkpoint interval plus the restart allowance: a transaction prepared before a failure may be aborted by the broker before the restarted job commits it, losing its records; raise TransactionTimeout (at most the broker's transaction.max.timeout.ms) or lower the checkpoint interval",
			"transactionTimeout", s.cfg.txnTimeout, "checkpointInterval", interval, "restartAllowance", s.cfg.allowance,
			"prefix", prefix)
	})
}

// slot is one transactional id of a writer and its producer.
type slot struct {
	id      string
	cl      *kgo.Client
	promise func(*kgo.Record, error)
	recycle func(*kgo.Record, error) // promise, then the record back to the sink's pool
	inTxn   bool                     // a transaction is open and being written
	pending *committable             // prepared, not yet seen committed
	done    *committable             // the last one seen committed
	started time.Time                // of the open transaction
}

type writer[T any] struct {
	s       *kafkaSink[T]
	subtask int
	par     int
	log     *slog.Logger
	prefix  string    // ExactlyOnce: of the transactional ids
	lease   *leaseRef // ExactlyOnce: this job's hold on the prefix
	reach   *reach    // watches the brokers of every client of the writer

	cl    *kgo.Client // None / AtLeastOnce
	slots []*slot     // ExactlyOnce
	next  int
	cur   *slot

	// pctx is the produce context: the ctx of Write (the same on every
	// call) bound by the reach; pparent is that ctx, pstop releases pctx.
	pctx    context.Context
	pparent context.Context
	pstop   context.CancelFunc

	err     atomic.Pointer[error]    // the first produce failure
	promise func(*kgo.Record, error) // of cl
	recycle func(*kgo.Record, error) // of cl, for records from the pool
}

// newRecord returns a zeroed record for Serialize, from the pool.
func (s *kafkaSink[T]) newRecord() *kgo.Record {
	if r, ok := s.recs.Get().(*kgo.Record); ok {
		return r
	}
	return &kgo.Record{}
}

// putRecord zeroes r (dropping its references to values) and puts it back.
func (s *kafkaSink[T]) putRecord(r *kgo.Record) {
	*r = kgo.Record{}
	s.recs.Put(r)
}

// recycling returns promise followed by putting the record back into the
// pool: franz-go reads nothing of a record after its promise returned
// (kgo.Client.finishRecordPromise), and the sink keeps no reference.
func (s *kafkaSink[T]) recycling(promise func(*kgo.Record, error)) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		promise(r, err)
		s.putRecord(r)
	}
}

// promiseFor returns the produce callback of a producer (cl, with
// transactional id txnID if any): the first failure becomes the writer's
// error, returned by the next Write, Flush or PrepareCommit.
func (w *writer[T]) promiseFor(cl *kgo.Client, txnID string) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		if err == nil {
			return
		}
		err = authzError(w.reach.cause(err), cl, w.s.cfg.brokers, opWrite, resourceNames{topic: r.Topic, txnID: txnID})
		if txnID != "" && isFenced(err) {
			err = w.fencedError(txnID, err)
		}
		if w.err.Load() == nil {
			err = fmt.Errorf("kafka sink: produce to topic %q partition %d: %w", r.Topic, r.Partition, err)
			w.err.CompareAndSwap(nil, &err)
		}
	}
}

// newWriter makes a writer; ctx (the subtask's) and SetupTimeout bound its
// start, so cancelling the job stops a start blocked on unreachable
// brokers or the prefix's lease.
func (s *kafkaSink[T]) newWriter(ctx context.Context, ictx sink.InitContext, states []writerState, restored bool) (_ *writer[T], err error) {
	w := &writer[T]{s: s, subtask: ictx.SubtaskIndex(), par: ictx.Parallelism(),
		log: s.cfg.logger.With("sink", ictx.OperatorName(), "subtask", ictx.SubtaskIndex())}
	w.reach = newReach(w.log, "kafka sink", s.cfg.brokers, s.cfg.connTimeout)
	defer func() {
		if err != nil {
			w.reach.close()
		}
	}()
	if s.cfg.guarantee != ExactlyOnce {
		w.cl, err = kgo.NewClient(w.producerOpts("")...)
		if err != nil {
			return nil, fmt.Errorf("%w: sink client: %w", ErrInvalidConfig, err)
		}
		w.promise = w.promiseFor(w.cl, "")
		w.recycle = w.s.recycling(w.promise)
		tctx, cancel := context.WithTimeout(ctx, s.cfg.setupTimeout)
		defer cancel()
		rctx, stop := w.reach.bound(tctx)
		defer stop()
		if err := s.cfg.ensureTopic(rctx, w.cl, w.reach); err != nil {
			w.cl.Close()
			return nil, err
		}
		return w, nil
	}
	w.prefix = s.cfg.prefix
	if w.prefix == "" {
		w.prefix = DefaultTransactionalIDPrefix(ictx)
		if w.prefix == "" {
			return nil, fmt.Errorf("%w: sink %q: the job has no id to derive the transactional id prefix from: set TransactionalIDPrefix", ErrInvalidConfig, ictx.OperatorName())
		}
	}
	w.log = w.log.With("prefix", w.prefix)
	s.warnTransactionTimeout(ictx.CheckpointInterval(), w.prefix)
	for k := range s.cfg.slots {
		w.slots = append(w.slots, &slot{id: txnID(w.prefix, w.subtask, k)})
	}
	tctx, cancel := context.WithTimeout(ctx, s.cfg.setupTimeout)
	defer cancel()
	rctx, stop := w.reach.bound(tctx)
	defer stop()
	if err := w.recover(rctx, ictx, states, restored); err != nil {
		w.lease.release()
		err = w.reach.cause(err)
		if tnf := (*TopicNotFoundError)(nil); errors.As(err, &tnf) {
			return nil, err
		}
		return nil, fmt.Errorf("kafka sink %q subtask %d: recover transactions of prefix %q: %w", ictx.OperatorName(), w.subtask, w.prefix, err)
	}
	return w, nil
}

// recover takes the prefix's lease, commits the prepared transactions of
// the restored states, then aborts (fences) every transactional id this
// subtask is responsible for.
//
// Responsibility is the rule of package sink/leftover, with the ids
// <prefix>-<subtask>-<slot> as names and every slot a leftover once the
// restored transactions are committed (State.From 0): on a fresh start,
// subtask s fences its own ids and every lingering id of subtask j with
// j % parallelism == s (ids from a higher earlier parallelism included).
// On a restore, each old writer's state reaches exactly one new writer,
// which commits its pending transactions and then fences the old writer's
// ids; ids of subtasks at or above the restored parallelism (no state has
// them) go to j % parallelism. A writer that got no state at all (a
// scale-up's new subtasks) does not know the restored parallelism and
// fences like on a fresh start: no state of its own subtask exists then.
func (w *writer[T]) recover(ctx context.Context, ictx sink.InitContext, states []writerState, restored bool) error {
	cfg := w.s.cfg
	admin, err := kgo.NewClient(append(w.s.baseOpts(), w.reach.opt())...)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	defer admin.Close()
	if err := pingUntil(ctx, admin); err != nil {
		if u := w.reach.err(); u != nil {
			return u
		}
		if sec := securityFailure(cfg.brokers, err); sec != err {
			return sec
		}
		return fmt.Errorf("cannot reach brokers %v: %w", cfg.brokers, err)
	}
	if err := w.s.checkTransactionTimeout(ctx, admin); err != nil {
		return err
	}
	if err := cfg.ensureTopic(ctx, admin, w.reach); err != nil {
		return err
	}
	// Hold the prefix's lease before committing or fencing anything:
	// another live sink on it makes this one refuse.
	w.lease, err = w.s.leases.acquire(ctx, w.prefix, ictx, w.s.baseOpts(), w.s.cfg.logger)
	if err != nil {
		return err
	}
	oldPar := 0
	now := time.Now()
	// What the earlier run saw committed is committed, whatever the
	// broker now says about it.
	for _, st := range states {
		for _, c := range st.Committed {
			w.s.bc.markCommitted(c)
		}
	}
	for _, st := range states {
		for _, c := range st.Pending {
			err := endTxn(ctx, admin, c, true)
			switch {
			case err == nil:
				w.log.Info("kafka sink: committed restored transaction", "txn", c.String())
				w.s.bc.markCommitted(c)
			case isTxnGone(err) && w.s.bc.isCommitted(c):
				// A committer here committed it; the id moved on since.
			case isTxnGone(err) && w.s.bc.preparedHere(c):
				// Prepared before a failover within this run and committed
				// by no one here: fenced, as the committer would say.
				return fmt.Errorf("kafka sink: commit restored transaction %v: %w", c, w.fencedError(c.TransactionalID, err))
			case isTxnGone(err):
				w.s.bc.judge(c, w.log, judgeGone(c, err, now, cfg.txnTimeout, w.s.leases.foreign(w.prefix)))
			default:
				return fmt.Errorf("commit restored transaction %v: %w", c,
					authzError(err, admin, cfg.brokers, opWrite, resourceNames{txnID: c.TransactionalID}))
			}
		}
		oldPar = max(oldPar, st.Parallelism)
	}
	req := w.leftovers(states, restored, oldPar)
	fenced := map[string]bool{}
	var own []string
	for _, j := range req.Subtasks() {
		for k := range cfg.slots {
			if req.Owns(j, int64(k)) {
				own = append(own, txnID(w.prefix, j, k))
			}
		}
	}
	if id, err := fenceTxnIDs(ctx, admin, own, cfg.txnTimeout); err != nil {
		return fmt.Errorf("abort lingering transaction %q: %w", id,
			authzError(err, admin, cfg.brokers, opWrite, resourceNames{txnID: id}))
	}
	for _, id := range own {
		fenced[id] = true
	}
	// Lingering ids beyond the pool or the current parallelism.
	adm := kadm.NewClient(admin)
	states4 := []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
	listed, err := adm.ListTransactionsByTxPattern(ctx, nil, states4, "^"+regexpQuote(w.prefix)+"-[0-9]+-[0-9]+$")
	if err != nil {
		listed, err = adm.ListTransactions(ctx, nil, states4)
	}
	if err != nil {
		w.log.Debug("kafka sink: cannot list transactions; only the slots of this subtask were aborted", "err", err)
		return nil
	}
	req.Existing = slices.Sorted(maps.Keys(listed))
	abort, err := leftover.Abort(req)
	if err != nil {
		return err
	}
	for _, id := range abort {
		if fenced[id] {
			continue
		}
		if err := fenceTxnID(ctx, admin, id, cfg.txnTimeout); err != nil {
			return fmt.Errorf("abort lingering transaction %q: %w", id,
				authzError(err, admin, cfg.brokers, opWrite, resourceNames{txnID: id}))
		}
		w.log.Info("kafka sink: aborted lingering transaction", "txn", id)
	}
	return nil
}

// leftovers describes, for package sink/leftover, which transactional ids
// of the prefix this writer fences (see recover): restored from states
// (each old writer's ids from slot 0 on), or, with no state, like a fresh
// start.
func (w *writer[T]) leftovers(states []writerState, restored bool, oldPar int) leftover.Request {
	req := leftover.Request{Parser: leftover.Scheme{Prefix: w.prefix + "-"}, Subtask: w.subtask, Parallelism: w.par,
		Restored: restored && len(states) > 0, PreviousParallelism: oldPar}
	for _, st := range states {
		req.States = append(req.States, leftover.State{Subtask: st.Subtask})
	}
	return req
}

func (w *writer[T]) failed() error {
	if p := w.err.Load(); p != nil {
		return *p
	}
	return w.reach.err()
}

// producerOpts are the sink's producer options plus the writer's
// reachability hooks.
func (w *writer[T]) producerOpts(txnID string) []kgo.Opt {
	return append(w.s.producerOpts(txnID), w.reach.opt())
}

// flushCtx bounds a flush by ctx (the subtask's: cancelling the job stops a
// blocked flush), FlushTimeout and the connect timeout.
func (w *writer[T]) flushCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	tctx, cancel := context.WithTimeout(ctx, w.s.cfg.flushTimeout)
	ctx, stop := w.reach.bound(tctx)
	return ctx, func() { stop(); cancel() }
}

// acquire picks the next free slot and begins a transaction on it.
func (w *writer[T]) acquire(ctx context.Context) error {
	n := len(w.slots)
	for i := range n {
		sl := w.slots[(w.next+i)%n]
		if sl.pending != nil {
			if !w.s.bc.isCommitted(*sl.pending) {
				continue
			}
			w.release(ctx, sl)
		}
		if sl.cl == nil {
			cl, err := kgo.NewClient(w.producerOpts(sl.id)...)
			if err != nil {
				return fmt.Errorf("%w: producer %q: %w", ErrInvalidConfig, sl.id, err)
			}
			sl.cl, sl.promise = cl, w.promiseFor(cl, sl.id)
			sl.recycle = w.s.recycling(sl.promise)
		}
		if err := sl.cl.BeginTransaction(); err != nil {
			return fmt.Errorf("kafka sink: begin transaction on %q: %w", sl.id, err)
		}
		sl.inTxn, sl.started = true, time.Now()
		w.cur = sl
		w.next = (w.next + i + 1) % n
		return nil
	}
	var waiting []string
	for _, sl := range w.slots {
		if sl.pending != nil {
			waiting = append(waiting, sl.pending.String())
		}
	}
	return fmt.Errorf("%w: subtask %d has %d slots, all holding prepared transactions whose checkpoints have not completed and committed: %v (checkpoints failing? raise TransactionSlots)",
		ErrNoFreeTransactionSlot, w.subtask, n, waiting)
}

// release makes a slot whose transaction a committer committed usable
// again: its producer still believes the transaction open, so it ends it
// with a commit, which the coordinator answers as a retry of the commit
// already done. If that fails the producer is replaced.
func (w *writer[T]) release(ctx context.Context, sl *slot) {
	c := *sl.pending
	sl.pending, sl.done = nil, &c
	ctx, cancel := context.WithTimeout(ctx, w.s.cfg.flushTimeout)
	defer cancel()
	if err := sl.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		w.log.Debug("kafka sink: producer could not confirm the commit of its transaction; replacing it", "txn", c.String(), "err", err)
		sl.cl.Close()
		sl.cl = nil
	}
}

// Write serializes v and produces it (inside the current transaction for
// ExactlyOnce).
func (w *writer[T]) Write(ctx context.Context, v T, c sink.Meta) error {
	if err := w.failed(); err != nil {
		return err
	}
	var r *kgo.Record
	if w.s.rser != nil {
		var err error
		if r, err = w.s.rser.SerializeRecord(v); err != nil {
			return fmt.Errorf("kafka sink: serialize: %w", err)
		}
		if r != nil {
			// The serializer handed its record over: produce it
			// under this writer's context.
			r.Context = nil
		}
	}
	pooled := r == nil
	if pooled {
		r = w.s.newRecord()
		if err := w.s.ser.Serialize(v, r); err != nil {
			w.s.putRecord(r)
			return fmt.Errorf("kafka sink: serialize: %w", err)
		}
	}
	if r.Topic == "" {
		if w.s.cfg.topic == "" {
			if pooled {
				w.s.putRecord(r)
			}
			return fmt.Errorf("%w: sink: record without topic and no DefaultTopic", ErrInvalidConfig)
		}
		r.Topic = w.s.cfg.topic
	}
	if c.HasTimestamp && r.Timestamp.IsZero() {
		r.Timestamp = time.UnixMilli(c.Timestamp)
	}
	cl, promise, recycle := w.cl, w.promise, w.recycle
	if w.slots != nil {
		if w.cur == nil {
			if err := w.acquire(ctx); err != nil {
				if pooled {
					w.s.putRecord(r)
				}
				return err
			}
		}
		cl, promise, recycle = w.cur.cl, w.cur.promise, w.cur.recycle
	}
	if pooled {
		promise = recycle
	}
	// Under the reach context, a produce blocked on a full buffer (or a
	// record still buffered) fails once the brokers stay unreachable, or
	// when ctx (the subtask's) is cancelled.
	cl.Produce(w.produceCtx(ctx), r, promise)
	return nil
}

// produceCtx returns ctx bound by the reach, made once per ctx (the engine
// passes the same ctx to every Write of a writer).
func (w *writer[T]) produceCtx(ctx context.Context) context.Context {
	if ctx != w.pparent {
		if w.pstop != nil {
			w.pstop()
		}
		w.pctx, w.pstop = w.reach.bound(ctx)
		w.pparent = ctx
	}
	return w.pctx
}

// Flush waits until every record is acknowledged (at checkpoints for
// AtLeastOnce and ExactlyOnce, and at the end of input).
func (w *writer[T]) Flush(ctx context.Context, endOfInput bool) error {
	if w.s.cfg.guarantee == None && !endOfInput {
		return w.failed()
	}
	cl := w.cl
	if w.slots != nil {
		if w.cur == nil {
			return w.failed()
		}
		cl = w.cur.cl
	}
	ctx, cancel := w.flushCtx(ctx)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka sink: flush: %w", w.reach.cause(err))
	}
	return w.failed()
}

// PrepareCommit ends the interval's transaction without committing it and
// returns it as a committable.
func (w *writer[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	if err := w.failed(); err != nil {
		return nil, err
	}
	sl := w.cur
	if sl == nil {
		return nil, nil
	}
	ctx, cancel := w.flushCtx(ctx)
	defer cancel()
	if err := sl.cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("kafka sink: flush: %w", w.reach.cause(err))
	}
	if err := w.failed(); err != nil {
		return nil, err
	}
	pid, epoch, err := sl.cl.ProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka sink: producer id of %q: %w", sl.id, w.reach.cause(err))
	}
	c := committable{TransactionalID: sl.id, ProducerID: pid, Epoch: epoch, Checkpoint: checkpointID, Started: sl.started.UnixMilli()}
	w.s.bc.markPrepared(c)
	sl.pending, sl.inTxn, w.cur = &c, false, nil
	return []committable{c}, nil
}

// SnapshotState returns the transactions prepared and not yet seen
// committed.
func (w *writer[T]) SnapshotState(context.Context, int64) ([]writerState, error) {
	st := writerState{Subtask: w.subtask, Parallelism: w.par, Prefix: w.prefix}
	for _, sl := range w.slots {
		switch {
		case sl.pending != nil && !w.s.bc.isCommitted(*sl.pending):
			st.Pending = append(st.Pending, *sl.pending)
		case sl.pending != nil:
			st.Committed = append(st.Committed, *sl.pending)
		case sl.done != nil:
			st.Committed = append(st.Committed, *sl.done)
		}
	}
	return []writerState{st}, nil
}

// NotifyCheckpointAborted is a no-op: the runtime commits an aborted
// checkpoint's committables with the next completed checkpoint, and a
// failure restores and aborts whatever no completed checkpoint holds.
func (w *writer[T]) NotifyCheckpointAborted(context.Context, int64) error { return nil }

// Close closes the producers. An open transaction is left to recovery (or
// the transaction timeout): Close must not make it visible, and aborting
// it here would race with a committer of a prepared one.
func (w *writer[T]) Close() error {
	defer w.lease.release()
	defer w.reach.close()
	if w.pstop != nil {
		defer w.pstop()
	}
	if w.cl != nil {
		w.cl.Close()
	}
	for _, sl := range w.slots {
		if sl.cl == nil {
			continue
		}
		if sl.inTxn {
			// Not prepared: abort the open transaction so readers do not
			// stall, best effort and bounded.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = sl.cl.AbortBufferedRecords(ctx)
			_ = sl.cl.EndTransaction(ctx, kgo.TryAbort)
			cancel()
		}
		sl.cl.Close()
	}
	return nil
}

type committer struct {
	s      sinkConfig
	opts   []kgo.Opt
	bc     *backchannel
	log    *slog.Logger
	leases *leaseSet

	cl *kgo.Client
}

// Commit commits each prepared transaction with a raw EndTxn; a
// transaction found committed before is a success.
func (c *committer) Commit(ctx context.Context, reqs []sink.CommitRequest[committable]) error {
	if c.cl == nil {
		cl, err := kgo.NewClient(c.opts...)
		if err != nil {
			return fmt.Errorf("%w: committer client: %w", ErrInvalidConfig, err)
		}
		c.cl = cl
	}
	for _, r := range reqs {
		tx := r.Committable()
		if c.bc.isCommitted(tx) {
			r.SignalAlreadyCommitted()
			continue
		}
		err := endTxn(ctx, c.cl, tx, true)
		switch {
		case err == nil:
			c.bc.markCommitted(tx)
		case isTxnGone(err) && c.bc.isCommitted(tx):
			r.SignalAlreadyCommitted()
		case isTxnGone(err) && c.bc.preparedHere(tx):
			// Prepared by this process (before or after a failover
			// within the run) and committed by no one here: another
			// producer took the id over (or the broker aborted it).
			r.SignalFailedWithUnknownReason(fencedCommitError(tx, err, c.s.txnTimeout, c.leases))
		case isTxnGone(err):
			v := c.bc.verdictOf(tx)
			if v == nil {
				j := judgeGone(tx, err, time.Now(), c.s.txnTimeout, c.leases.foreignAll())
				v = &j
				c.bc.judge(tx, c.log, j)
			}
			if v.lost {
				r.SignalFailedWithKnownReason(v.err)
			} else {
				r.SignalAlreadyCommitted()
			}
		case ctx.Err() != nil:
			return errors.Join(err, ctx.Err())
		case isAuthErr(err):
			r.SignalFailedWithUnknownReason(fmt.Errorf("kafka sink: commit %v: %w", tx,
				authzError(err, c.cl, c.s.brokers, opWrite, resourceNames{txnID: tx.TransactionalID})))
		case r.Retries() < 5:
			c.log.Warn("kafka sink: commit failed; retrying later", "txn", tx.String(), "err", err)
			r.RetryLater()
		default:
			r.SignalFailedWithUnknownReason(fmt.Errorf("kafka sink: commit %v: %w", tx, err))
		}
	}
	return nil
}

func (c *committer) Close() error {
	if c.cl != nil {
		c.cl.Close()
	}
	return nil
}

// pingUntil pings the cluster until it answers or ctx is done, so that a
// writer restarting while a broker restarts waits for it (bounded by
// SetupTimeout).
func pingUntil(ctx context.Context, cl *kgo.Client) error {
	backoff := 100 * time.Millisecond
	for {
		err := cl.Ping(ctx)
		if err == nil || ctx.Err() != nil || isAuthErr(err) || isSecurityErr(err) {
			return err
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// isTLSVerifyErr reports a broker certificate the client does not accept
// (wrong CA, wrong host name, expired), which retrying does not fix.
func isTLSVerifyErr(err error) bool {
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &cv) || errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci)
}

// isAuthErr reports authentication and authorization failures, which
// retrying does not fix.
func isAuthErr(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed)
}
