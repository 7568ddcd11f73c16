package kafka

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func newJobID(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// genJob builds datagen(count, rate) → Kafka sink (exactly-once) as job
// jobID; opts are added to the sink's.
func genJob(t *testing.T, brokers []string, jobID, topic string, count int64, rate float64, restartStrategy restart.Strategy, opts ...SinkOption) *stream.Environment {
	t.Helper()
	return genJobLogged(t, stream.DiscardLogger(), brokers, jobID, topic, count, rate, restartStrategy, opts...)
}

// genJobLogged is genJob with the job's log going to log.
func genJobLogged(t *testing.T, log *slog.Logger, brokers []string, jobID, topic string, count int64, rate float64, restartStrategy restart.Strategy, opts ...SinkOption) *stream.Environment {
	t.Helper()
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(2), datagen.RatePerSecond(rate))
	sk, err := NewSink(brokers, indexSerializer(gen), append([]SinkOption{DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
		TransactionTimeout(time.Minute), SinkLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.JobID(jobID),
		stream.Restart(restartStrategy), stream.Logger(log))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
	return env
}

// TestDefaultPrefixesTwoConcurrentJobs runs two jobs at once whose
// exactly-once sinks have the same operator name and no prefix: their
// default prefixes differ (they contain the job id), and both deliver
// every record once. Before, the library required a prefix and the CLI
// defaulted to sluice-<sink name>, which two such jobs shared.
func TestDefaultPrefixesTwoConcurrentJobs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const count = 4000
		topics := []string{createTopic(t, b.brokers, 2), createTopic(t, b.brokers, 2)}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range 2 {
			env := genJob(t, b.brokers, newJobID(t), topics[i], count, 4*count, restart.FixedDelay(3, 0))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				defer cancel()
				_, errs[i] = env.Execute(ctx, "same-name")
			})
		}
		wg.Wait()
		for i, topic := range topics {
			if errs[i] != nil {
				t.Fatalf("job %d: %v", i, errs[i])
			}
			checkIndexes(t, readCommitted(t, b.brokers, topic, count, 3*time.Second), count)
		}
	})
}

// TestDefaultTransactionalIDPrefix pins the default's form.
func TestDefaultTransactionalIDPrefix(t *testing.T) {
	got := DefaultTransactionalIDPrefix(&fakeInit{job: "0123456789abcdef", op: "to kafka/1"})
	if want := "sluice-0123456789abcdef-to_kafka_1"; got != want {
		t.Fatalf("default prefix %q, want %q", got, want)
	}
	if got := DefaultTransactionalIDPrefix(&fakeInit{op: "k"}); got != "" {
		t.Fatalf("without a job id: %q, want empty", got)
	}
}

// waitCommitted waits (bounded) until topic has at least one committed
// record.
func waitCommitted(t *testing.T, brokers []string, topic string) {
	t.Helper()
	for range 120 {
		if len(readCommitted(t, brokers, topic, 1, 500*time.Millisecond)) > 0 {
			return
		}
	}
	t.Fatalf("nothing committed to %s in a minute", topic)
}

// TestSamePrefixSecondJobRefused runs a job and, while it runs, a second
// job on the same transactional id prefix: an explicit prefix set on two
// jobs, and one job run twice (a copied checkpoint: the same job id, so
// the same default prefix). The second refuses to start before it fences
// or commits anything, naming both (job ids and names, host and pid), and
// does not restart; the first delivers every record once.
func TestSamePrefixSecondJobRefused(t *testing.T) {
	b := realBrokers(t)
	t.Run("explicit prefix", func(t *testing.T) {
		prefix := uniqueName("shared")
		secondJobRefused(t, b, newJobID(t), newJobID(t), TransactionalIDPrefix(prefix))
	})
	t.Run("same job twice", func(t *testing.T) {
		id := newJobID(t)
		secondJobRefused(t, b, id, id)
	})
}

func secondJobRefused(t *testing.T, b []string, idA, idB string, opts ...SinkOption) {
	const count = 6000
	topicA, topicB := createTopic(t, b, 2), createTopic(t, b, 2)
	envA := genJob(t, b, idA, topicA, count, 2000, restart.FixedDelay(3, 0), opts...)
	var wg sync.WaitGroup
	var errA error
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		_, errA = envA.Execute(ctx, "job-a")
	})
	waitCommitted(t, b, topicA)
	envB := genJob(t, b, idB, topicB, count, 2000, restart.FixedDelay(5, 0), opts...)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	resB, errB := envB.Execute(ctx, "job-b")
	cancel()
	wg.Wait()
	if !errors.Is(errB, ErrPrefixInUse) || !errors.Is(errB, restart.ErrUnrecoverable) {
		t.Fatalf("second job: %v, want ErrPrefixInUse", errB)
	}
	for _, want := range []string{idA, idB, `"job-a"`, `"job-b"`, "pid "} {
		if !strings.Contains(errB.Error(), want) {
			t.Errorf("second job's error does not name %q: %v", want, errB)
		}
	}
	if resB != nil && resB.Restarts != 0 {
		t.Errorf("second job restarted %d times; the failure is unrecoverable", resB.Restarts)
	}
	if errA != nil {
		t.Fatalf("first job: %v", errA)
	}
	checkIndexes(t, readCommitted(t, b, topicA, count, 3*time.Second), count)
	if n := len(readCommitted(t, b, topicB, -1, time.Second)); n != 0 {
		t.Errorf("the refused job committed %d records", n)
	}
}

// TestFencedProducerFailsUnrecoverable fences the transactional ids of a
// running job from outside (as a producer that ignores the lease would):
// the job fails at once, with a restart strategy that would allow
// restarts, with an error that says another producer took over the id.
// Before, the job restarted, recovery took the aborted transaction for
// committed, and the job ended without error, its records lost.
func TestFencedProducerFailsUnrecoverable(t *testing.T) {
	b := realBrokers(t)
	const count = 20000
	prefix := uniqueName("fenced")
	topic := createTopic(t, b, 2)
	// The job's log says what a restart was for.
	var logs logBuffer
	env := genJobLogged(t, slog.New(slog.NewTextHandler(&logs, nil)), b, newJobID(t), topic, count, 2000, restart.FixedDelay(10, 0), TransactionalIDPrefix(prefix), TransactionSlots(2))
	var wg sync.WaitGroup
	var err error
	var res *stream.Result
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		res, err = env.Execute(ctx, "victim")
	})
	waitCommitted(t, b, topic)
	admin := newClient(t, b)
	for s := range 2 {
		for k := range 2 {
			if ferr := fenceTxnID(t.Context(), admin, txnID(prefix, s, k), time.Minute); ferr != nil {
				t.Fatal(ferr)
			}
		}
	}
	wg.Wait()
	if err == nil && res != nil && res.Restarts > 0 {
		// A fence that fell while every subtask was restoring (a
		// restart for want of a free slot, under load) found no open or
		// prepared transaction: nothing was lost, and the job went on.
		// Then the output must hold every record once.
		checkIndexes(t, readCommitted(t, b, topic, count, 3*time.Second), count)
		t.Logf("the fence found no transaction to abort (%d restarts before it); the output holds every record once", res.Restarts)
		return
	}
	if !errors.Is(err, ErrFenced) || !errors.Is(err, restart.ErrUnrecoverable) {
		t.Fatalf("job: %v, want ErrFenced; the job's log:\n%s", err, logs.String())
	}
	if !strings.Contains(err.Error(), `took over transactional id "`+prefix+"-") {
		t.Errorf("error does not say who took over which id: %v", err)
	}
	// No restart for the fence. Under load (the tests of four packages at
	// once on two cores) the 50-ms checkpoints can fall behind their
	// commits until a subtask has no free slot, a restart of its own
	// before the fence; the fence after it must still fail the job (it
	// ended without error, its records lost, before the committer took a
	// transaction prepared before a failover within the run for one of an
	// earlier run).
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "restarting") && !strings.Contains(l, ErrNoFreeTransactionSlot.Error()) {
			t.Errorf("%d restarts, one for the fence; want none for it; the job's log:\n%s", res.Restarts, logs.String())
			break
		}
	}
}

// TestOldAndFutureTimestamps copies a topic whose records are timestamped
// three days in the past and three days in the future through a Kafka →
// Kafka exactly-once job with injected failures: the output holds every
// record once, with its input timestamp. Before, records older than the
// sink's record timeout (FlushTimeout) failed at once ("records have
// timed out before they were able to be produced").
func TestOldAndFutureTimestamps(t *testing.T) {
	b := realBrokers(t)
	const count = 3000
	in, out := uniqueName("ts-in"), uniqueName("ts-out")
	adm := kadm.NewClient(newClient(t, b))
	// The broker refuses timestamps more than an hour ahead by default
	// (message.timestamp.after.max.ms, Kafka 4.x); allow them here.
	week := "604800000"
	cfg := map[string]*string{"message.timestamp.after.max.ms": &week}
	for _, name := range []string{in, out} {
		if _, err := adm.CreateTopic(t.Context(), 2, 1, cfg, name); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	ts := func(i int) time.Time {
		if i%2 == 0 {
			return now.Add(-72 * time.Hour).Add(time.Duration(i) * time.Millisecond)
		}
		return now.Add(72 * time.Hour).Add(time.Duration(i) * time.Millisecond)
	}
	prod := newClient(t, b, kgo.DefaultProduceTopic(in))
	want := map[string]int64{}
	for i := range count {
		v := strconv.Itoa(i)
		want[v] = ts(i).UnixMilli()
		if err := prod.ProduceSync(t.Context(), &kgo.Record{Value: []byte(v), Timestamp: ts(i), Partition: int32(i % 2)}).FirstErr(); err != nil && i == 0 {
			t.Fatal(err)
		}
	}
	src, err := NewSource(b, StringDeserializer(), Topics(in), Bounded(Latest()), SourceLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSink(b, StringSerializer(), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce), TransactionTimeout(time.Minute),
		FlushTimeout(10*time.Second), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 2},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: count / 4},
		faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: 1, Checkpoint: 4})
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Restart(restart.FixedDelay(10, 0)),
		stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[string](), "in")
	stream.SinkTo(s, faultinject.WrapSink(sk, plan), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "timestamps")
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("fired %v, %d restarts", plan.Fired(), res.Restarts)
	recs := readCommitted(t, b, out, count, 3*time.Second)
	seen := map[string]bool{}
	for _, r := range recs {
		v := string(r.Value)
		if seen[v] {
			t.Fatalf("record %s twice", v)
		}
		seen[v] = true
		w, ok := want[v]
		if !ok {
			t.Fatalf("unexpected record %q", v)
		}
		if r.Timestamp.UnixMilli() != w {
			t.Fatalf("record %s: timestamp %v, want the input's %v", v, r.Timestamp.UTC(), time.UnixMilli(w).UTC())
		}
	}
	if len(seen) != count {
		t.Fatalf("%d of %d records", len(seen), count)
	}
}

// fakeInit is a sink.InitContext for driving a sink without the engine.
type fakeInit struct {
	job, op       string
	subtask, par  int
	restored      int64
	checkInterval time.Duration
}

func (f *fakeInit) SubtaskIndex() int      { return f.subtask }
func (f *fakeInit) Parallelism() int       { return max(f.par, 1) }
func (f *fakeInit) Attempt() int           { return 0 }
func (f *fakeInit) JobName() string        { return "fake" }
func (f *fakeInit) JobID() string          { return f.job }
func (f *fakeInit) OperatorName() string   { return f.op }
func (f *fakeInit) OperatorUID() string    { return f.op }
func (f *fakeInit) Metrics() metrics.Group { return metrics.NewRegistry().Root() }
func (f *fakeInit) RestoredCheckpointID() (int64, bool) {
	return f.restored, f.restored > 0
}
func (f *fakeInit) CheckpointInterval() time.Duration { return f.checkInterval }

// levels returns the records of level lvl or above.
func (h captureHandler) atLeast(lvl slog.Level) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, r := range *h.recs {
		if r.Level >= lvl {
			out = append(out, r.Level.String()+" "+r.Message)
		}
	}
	return out
}

// TestRestoreAfterCommitLogsNoLoss sets up, through the sink's own API on
// the real broker, what a kill -9 right after checkpoint 2 leaves: the
// transaction of checkpoint 1 was committed (its commit had not been
// recorded by the runtime yet, so checkpoint 2 still holds it) or its
// commit was never sent, and the one of checkpoint 2 is prepared. A new process restores from checkpoint 2:
// the writer commits checkpoint 2's transaction and fences its ids, the
// committer re-commits both. Every record is committed once, no commit
// fails, and nothing is logged at warning level or above. Before, the
// committer answered checkpoint 1's transaction with "failed with a known
// reason" (its id had been fenced by recovery), the line real loss prints.
func TestRestoreAfterCommitLogsNoLoss(t *testing.T) {
	b := realBrokers(t)
	t.Run("checkpoint 1 committed before the kill", func(t *testing.T) { restoreAfterKill(t, b, true) })
	t.Run("checkpoint 1 commit never sent", func(t *testing.T) { restoreAfterKill(t, b, false) })
}

func restoreAfterKill(t *testing.T, b []string, committed bool) {
	topic := createTopic(t, b, 1)
	job, prefix := newJobID(t), uniqueName("restore")
	newSink := func(h slog.Handler) sinkerase.Sink[string] {
		s, err := NewSink(b, StringSerializer(), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), SinkLogger(slog.New(h)))
		if err != nil {
			t.Fatal(err)
		}
		return sinkerase.Erase(s)
	}
	ctx := t.Context()
	first := newCaptureHandler()
	s1 := newSink(first)
	w, err := sinkerase.Open(context.Background(), s1, &fakeInit{job: job, op: "k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := s1.NewCommitter(context.Background(), &fakeInit{job: job, op: "k"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(p string, cp int64) []byte {
		for i := range 10 {
			if err := w.Write(context.Background(), p+strconv.Itoa(i), sink.Meta{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		cs, err := w.PrepareCommit(context.Background(), cp)
		if err != nil || len(cs) != 1 {
			t.Fatalf("prepare %d: %v %d", cp, err, len(cs))
		}
		return cs[0]
	}
	cm1 := write("a", 1)
	if committed {
		req := &sinkrt.Request{CheckpointID: 1, Data: cm1}
		if err := c1.Commit(ctx, []*sinkrt.Request{req}); err != nil || req.Outcome != sinkrt.Committed {
			t.Fatalf("commit of checkpoint 1: %v, outcome %v", err, req.Outcome)
		}
	}
	cm2 := write("b", 2)
	states, err := w.SnapshotState(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	// The process dies (its producers and lease go away).
	_ = c1.Close()
	_ = w.Close()

	second := newCaptureHandler()
	s2 := newSink(second)
	restoredCtx := &fakeInit{job: job, op: "k", restored: 2}
	w2, err := sinkerase.Open(context.Background(), s2, restoredCtx, states)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	c2, err := s2.NewCommitter(context.Background(), restoredCtx)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	reqs := []*sinkrt.Request{{CheckpointID: 1, Data: cm1}, {CheckpointID: 2, Data: cm2}}
	if err := c2.Commit(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.Outcome != sinkrt.Committed && r.Outcome != sinkrt.AlreadyCommitted {
			t.Errorf("restored commit of checkpoint %d: outcome %v, err %v", r.CheckpointID, r.Outcome, r.Err)
		}
	}
	if bad := second.atLeast(slog.LevelWarn); len(bad) > 0 {
		t.Errorf("the restore logged warnings or errors: %q", bad)
	}
	recs := readCommitted(t, b, topic, 20, 2*time.Second)
	seen := map[string]int{}
	for _, r := range recs {
		seen[string(r.Value)]++
	}
	for _, p := range []string{"a", "b"} {
		for i := range 10 {
			if n := seen[p+strconv.Itoa(i)]; n != 1 {
				t.Errorf("record %s%d committed %d times", p, i, n)
			}
		}
	}
	if len(recs) != 20 {
		t.Errorf("%d records, want 20", len(recs))
	}
}

// TestRecoveryNeverFencesAnUncommittedRestoredTransaction prepares a
// transaction, then restores a writer from a state that lists it as
// pending: before the writer fences the ids of its prefix, the
// transaction is committed (its records are visible once), so recovery
// never aborts a transaction that a completed checkpoint holds.
func TestRecoveryNeverFencesAnUncommittedRestoredTransaction(t *testing.T) {
	b := realBrokers(t)
	topic := createTopic(t, b, 1)
	job, prefix := newJobID(t), uniqueName("nofence")
	mk := func() sinkerase.Sink[string] {
		s, err := NewSink(b, StringSerializer(), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(prefix), TransactionTimeout(time.Minute), SinkLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		return sinkerase.Erase(s)
	}
	s1 := mk()
	w, err := sinkerase.Open(context.Background(), s1, &fakeInit{job: job, op: "k"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := w.Write(context.Background(), "x"+strconv.Itoa(i), sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.PrepareCommit(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	states, err := w.SnapshotState(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	w2, err := sinkerase.Open(context.Background(), mk(), &fakeInit{job: job, op: "k", restored: 7}, states)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if got := len(readCommitted(t, b, topic, 5, 2*time.Second)); got != 5 {
		t.Fatalf("%d of 5 records of the restored transaction committed", got)
	}
}

// openTxn begins a transaction on a new transactional id named after
// name, produces one record to topic in it and returns it as a
// committable (the transaction stays open).
func openTxn(t *testing.T, b []string, topic, name string) committable {
	t.Helper()
	id := uniqueName(name)
	cl := newClient(t, b, kgo.TransactionalID(id), kgo.TransactionTimeout(time.Minute))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return committable{TransactionalID: id, ProducerID: pid, Epoch: epoch, Started: time.Now().UnixMilli()}
}

// TestEndTxnAnswers pins what Apache Kafka 4.x answers to an EndTxn
// commit with a prepared transaction's producer id and epoch, which is
// all a restore can learn (see verdict.go): success while the transaction
// is open and again after it was committed; INVALID_TXN_STATE after it
// was aborted; PRODUCER_FENCED once the id was initialized again, whether
// the transaction had been committed or aborted.
func TestEndTxnAnswers(t *testing.T) {
	b := realBrokers(t)
	topic := createTopic(t, b, 1)
	ctx := t.Context()
	admin := newClient(t, b)
	prepare := func() committable { return openTxn(t, b, topic, "answers") }
	expect := func(what string, err, want error) {
		t.Helper()
		if (want == nil && err != nil) || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	c := prepare()
	expect("commit of an open transaction", endTxn(ctx, admin, c, true), nil)
	expect("commit again", endTxn(ctx, admin, c, true), nil)
	expect("fence after the commit", fenceTxnID(ctx, admin, c.TransactionalID, time.Minute), nil)
	expect("commit of a committed transaction after a fence", endTxn(ctx, admin, c, true), kerr.ProducerFenced)

	c = prepare()
	expect("abort", endTxn(ctx, admin, c, false), nil)
	expect("commit of an aborted transaction", endTxn(ctx, admin, c, true), kerr.InvalidTxnState)

	c = prepare()
	expect("fence of an open transaction", fenceTxnID(ctx, admin, c.TransactionalID, time.Minute), nil)
	expect("commit of a transaction aborted by a fence", endTxn(ctx, admin, c, true), kerr.ProducerFenced)
}

// txnRequest is a sink.CommitRequest for calling a committer directly.
type txnRequest struct {
	c             committable
	known, failed error
	already       bool
}

func (r *txnRequest) Committable() committable              { return r.c }
func (r *txnRequest) CheckpointID() int64                   { return r.c.Checkpoint }
func (r *txnRequest) Retries() int                          { return 0 }
func (r *txnRequest) RetryLater()                           {}
func (r *txnRequest) UpdateAndRetryLater(committable)       {}
func (r *txnRequest) SignalAlreadyCommitted()               { r.already = true }
func (r *txnRequest) SignalFailedWithKnownReason(err error) { r.known = err }
func (r *txnRequest) SignalFailedWithUnknownReason(err error) {
	r.failed = err
}

// TestCommitterFencedAfterFailover: a transaction this process prepared
// before a failover within the run (restored from a later checkpoint
// than its own), aborted by another producer's fence, fails the job as
// fenced (ErrFenced, unrecoverable), as it would have without the
// failover. Before, the committer judged it like one of an earlier run,
// logged its records lost and went on: under load a restart for want of
// a free slot just before the fence made TestFencedProducerFailsUnrecoverable's
// job end without error. The same transaction restored by a new process
// (a resume with --from) is still judged by judgeGone (lost, logged).
func TestCommitterFencedAfterFailover(t *testing.T) {
	b := realBrokers(t)
	topic := createTopic(t, b, 1)
	ctx := t.Context()
	admin := newClient(t, b)
	prepare := func() committable { // open at checkpoint 3, then fenced
		c := openTxn(t, b, topic, "failover")
		c.Checkpoint = 3
		if err := fenceTxnID(ctx, admin, c.TransactionalID, time.Minute); err != nil {
			t.Fatal(err)
		}
		return c
	}
	commit := func(bc *backchannel, c committable) *txnRequest {
		cfg := defaultSinkConfig()
		cfg.brokers = b
		ks := &kafkaSink[string]{cfg: cfg, bc: bc, leases: newLeaseSet()}
		cm := &committer{s: ks.cfg, opts: ks.baseOpts(), bc: bc, leases: newLeaseSet(), log: quiet}
		defer cm.Close()
		r := &txnRequest{c: c}
		if err := cm.Commit(ctx, []sink.CommitRequest[committable]{r}); err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Prepared here (checkpoint 3), restored from checkpoint 5 by a
	// failover, fenced: the job fails.
	c := prepare()
	bc := newBackchannel()
	bc.markPrepared(committable{TransactionalID: c.TransactionalID, Checkpoint: 2})
	r := commit(bc, c)
	if !errors.Is(r.failed, ErrFenced) || !errors.Is(r.failed, restart.ErrUnrecoverable) {
		t.Errorf("prepared here, fenced after a failover: failed %v, known %v, already committed %v; want ErrFenced", r.failed, r.known, r.already)
	}

	// Restored by a new process: judged, not failed (the restore
	// cannot tell a fence from its own earlier commit here).
	c = prepare()
	r = commit(newBackchannel(), c)
	if r.failed != nil {
		t.Errorf("restored by a new process: failed %v; want it judged (judgeGone)", r.failed)
	}
}
