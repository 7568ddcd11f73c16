package opensearch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
)

// Metric names of the sink's writers, in the writer's metric group (the
// runtime counts numRecordsSend itself).
const (
	// MetricBulkRequests counts bulk requests sent, retries included.
	MetricBulkRequests = "numBulkRequests"
	// MetricBulkRetries counts bulk requests sent again after a
	// connection error or status 429/502/503/504.
	MetricBulkRetries = "numBulkRetries"
	// MetricItemRetries counts documents sent again after OpenSearch
	// rejected them with 429 or 5xx.
	MetricItemRetries = "numItemRetries"
	// MetricRejectedItems counts documents OpenSearch answered with 429
	// (back-pressure from its write queue).
	MetricRejectedItems = "numRejectedItems"
	// MetricItemFailures (numRecordsSendErrors) counts documents rejected
	// for good, whatever the policy.
	MetricItemFailures = metrics.NumRecordsSendErrors
	// MetricDropped counts documents dropped by the Drop policy.
	MetricDropped = "numRecordsDropped"
	// MetricDeadLettered counts documents handed to the dead-letter
	// function.
	MetricDeadLettered = "numRecordsDeadLettered"
	// MetricConflictsSkipped counts replays that found their document
	// already written: a create whose id exists, an external version not
	// above the stored one.
	MetricConflictsSkipped = "numVersionConflictsSkipped"
	// MetricBytesOut counts the bytes of bulk request bodies.
	MetricBytesOut = metrics.NumBytesOut
	// MetricBulkLatency is a gauge: the last bulk request's round trip in
	// milliseconds.
	MetricBulkLatency = "lastBulkLatencyMs"
)

// NewSink returns a sink that writes the actions doc makes of its records
// to the cluster at urls with bulk requests. doc is called on the
// subtask's goroutine; the Doc of the action it returns must not be
// changed afterwards (the sink keeps it until the document is
// acknowledged). An error from doc fails the job.
//
// Each writer fills a bulk request up to [BulkActions] actions or
// [BulkBytes] bytes, or for [FlushInterval], and sends it while the next
// one fills; at most [MaxInFlightRequests] are unanswered. At every
// checkpoint the writer sends what it holds and waits until every request
// is answered and every document settled (written, or routed by the
// [OnItemFailure] policy): a checkpoint completes only with everything
// before it acknowledged.
func NewSink[T any](urls []string, doc func(v T, m sink.Meta) (Action, error), opts ...SinkOption) (sink.Sink[T], error) {
	c := defaultSinkConfig()
	for _, o := range opts {
		o.apply(&c)
	}
	var err error
	if c.conn.urls, err = parseURLs(urls); err != nil {
		return nil, err
	}
	if doc == nil {
		return nil, fmt.Errorf("%w: sink: the document function is nil", ErrInvalidConfig)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &osSink[T]{cfg: c, doc: doc}, nil
}

type osSink[T any] struct {
	cfg sinkConfig
	doc func(T, sink.Meta) (Action, error)
}

type writerMetrics struct {
	requests, retries, itemRetries, rejected, failures, dropped, deadLettered, conflicts, bytesOut *metrics.Counter
	latency                                                                                        *latencyGauge
}

type latencyGauge struct {
	mu sync.Mutex
	ms int64
}

func (g *latencyGauge) set(d time.Duration) { g.mu.Lock(); g.ms = d.Milliseconds(); g.mu.Unlock() }
func (g *latencyGauge) get() int64          { g.mu.Lock(); defer g.mu.Unlock(); return g.ms }

func newWriterMetrics(g metrics.Group) writerMetrics {
	m := writerMetrics{
		requests:     g.Counter(MetricBulkRequests),
		retries:      g.Counter(MetricBulkRetries),
		itemRetries:  g.Counter(MetricItemRetries),
		rejected:     g.Counter(MetricRejectedItems),
		failures:     g.Counter(MetricItemFailures),
		dropped:      g.Counter(MetricDropped),
		deadLettered: g.Counter(MetricDeadLettered),
		conflicts:    g.Counter(MetricConflictsSkipped),
		bytesOut:     g.Counter(MetricBytesOut),
		latency:      &latencyGauge{},
	}
	g.Gauge(MetricBulkLatency, m.latency.get)
	return m
}

// CreateWriter connects (with retries: a node that is down for a while
// delays the writer rather than failing it) and starts the writer.
func (s *osSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	cl, err := newClient(ctx, &s.cfg.conn)
	if err != nil {
		return nil, err
	}
	if err := cl.ping(ctx); err != nil {
		cl.close()
		return nil, fmt.Errorf("opensearch sink: %w", err)
	}
	wctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	w := &writer[T]{
		s:      s,
		cl:     cl,
		ctx:    wctx,
		cancel: cancel,
		log:    s.cfg.conn.logger.With("connector", "opensearch", "subtask", ic.SubtaskIndex()),
		m:      newWriterMetrics(ic.Metrics()),
		sem:    make(chan struct{}, s.cfg.inFlight),
		free:   make(chan *batch, s.cfg.inFlight+1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if s.cfg.interval > 0 {
		go w.tick()
	} else {
		close(w.done)
	}
	return w, nil
}

// batch is one bulk request: its NDJSON body and its actions.
type batch struct {
	body    []byte
	actions []Action
	offsets []int // where each action's lines start in body
	first   time.Time
}

type writer[T any] struct {
	s      *osSink[T]
	cl     *client
	ctx    context.Context // of the sending goroutines; cancelled by Close
	cancel context.CancelCauseFunc
	log    *slog.Logger
	m      writerMetrics

	mu  sync.Mutex // guards cur: Write and the interval ticker
	cur *batch

	dispatchMu sync.Mutex    // orders dispatches: requests leave in the order they filled
	sem        chan struct{} // one token per request in flight
	wg         sync.WaitGroup

	free      chan *batch // sent batches, for their buffers
	lastIndex string      // the last index name found valid (Write only)

	errMu   sync.Mutex
	err     error // the first failure of a sending goroutine
	lastLog time.Time

	stop, done chan struct{} // the interval ticker's
	closeOnce  sync.Once
}

func (w *writer[T]) failed() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

func (w *writer[T]) fail(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *writer[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	if err := w.failed(); err != nil {
		return err
	}
	a, err := w.s.doc(v, m)
	if err != nil {
		return fmt.Errorf("opensearch sink: the document function failed: %w", err)
	}
	if a.Index != w.lastIndex || a.Index == "" {
		if err := ValidIndexName(a.Index); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidAction, err)
		}
		w.lastIndex = a.Index
	}
	if err := a.validate(w.s.cfg.guarantee == ExactlyOnce, false); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidAction, err)
	}
	w.mu.Lock()
	if w.cur == nil {
		w.cur = w.newBatch()
	}
	b := w.cur
	start := len(b.body)
	body, err := a.appendTo(b.body)
	if err != nil {
		b.body = body[:start]
		w.mu.Unlock()
		return fmt.Errorf("%w: %v of id %q into index %q: %w", ErrInvalidAction, a.Op, a.ID, a.Index, err)
	}
	b.body = body
	b.actions = append(b.actions, a)
	b.offsets = append(b.offsets, start)
	full := len(b.actions) >= w.s.cfg.maxActions || len(b.body) >= w.s.cfg.maxBytes
	w.mu.Unlock()
	if full {
		return w.dispatch(ctx)
	}
	return nil
}

// dispatch sends the filling batch once a request slot is free.
func (w *writer[T]) dispatch(ctx context.Context) error {
	w.dispatchMu.Lock()
	defer w.dispatchMu.Unlock()
	w.mu.Lock()
	b := w.cur
	w.cur = nil
	w.mu.Unlock()
	if b == nil {
		return nil
	}
	if len(b.actions) == 0 { // the only action did not encode
		w.recycle(b)
		return nil
	}
	select {
	case w.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("opensearch sink: waiting for a free request slot: %w", context.Cause(ctx))
	case <-w.ctx.Done():
		return fmt.Errorf("opensearch sink: writer closed: %w", context.Cause(w.ctx))
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		if err := w.send(w.ctx, b); err != nil {
			w.fail(err)
		}
		w.recycle(b)
	}()
	return nil
}

// newBatch returns an empty batch, reusing a sent one's buffers.
func (w *writer[T]) newBatch() *batch {
	select {
	case b := <-w.free:
		b.first = time.Now()
		return b
	default:
		return &batch{first: time.Now(), body: make([]byte, 0, 64<<10)}
	}
}

// recycle keeps a sent batch's buffers for the next one.
func (w *writer[T]) recycle(b *batch) {
	clear(b.actions) // drop the documents
	b.body, b.actions, b.offsets = b.body[:0], b.actions[:0], b.offsets[:0]
	select {
	case w.free <- b:
	default:
	}
}

// Flush sends what the writer holds and waits until every request it
// sent is answered and every document settled.
func (w *writer[T]) Flush(ctx context.Context, _ bool) error {
	if err := w.dispatch(ctx); err != nil {
		return err
	}
	// Taking every slot means no request is in flight.
	n := 0
	defer func() {
		for ; n > 0; n-- {
			<-w.sem
		}
	}()
	for ; n < cap(w.sem); n++ {
		select {
		case w.sem <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("opensearch sink: waiting for bulk requests to be answered: %w", context.Cause(ctx))
		}
	}
	return w.failed()
}

func (w *writer[T]) Close() error {
	w.closeOnce.Do(func() {
		if w.s.cfg.interval > 0 {
			close(w.stop)
		}
		// Cancel first: the ticker may wait in dispatch for a slot that a
		// request stuck on the node holds.
		w.cancel(errors.New("opensearch sink: writer closed"))
		<-w.done
		w.wg.Wait()
		w.cl.close()
	})
	return nil
}

// tick sends a partly filled batch once it is FlushInterval old.
func (w *writer[T]) tick() {
	defer close(w.done)
	iv := w.s.cfg.interval
	t := time.NewTicker(max(iv/4, 5*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			due := w.cur != nil && time.Since(w.cur.first) >= iv
			w.mu.Unlock()
			if due {
				_ = w.dispatch(w.ctx) // an error is the writer closing
			}
		}
	}
}

type bulkItem struct {
	Status int `json:"status"`
	Error  *struct {
		Type     string `json:"type"`
		Reason   string `json:"reason"`
		CausedBy *struct {
			Type   string `json:"type"`
			Reason string `json:"reason"`
		} `json:"caused_by"`
	} `json:"error"`
}

type bulkResponse struct {
	Errors bool                  `json:"errors"`
	Items  []map[string]bulkItem `json:"items"`
}

var noErrors = []byte(`{"errors":false`)

// send writes one batch: the request is retried on connection errors and
// 429/5xx answers, documents rejected with 429 or 5xx are sent again, and
// documents rejected for good go to the policy.
func (w *writer[T]) send(ctx context.Context, b *batch) error {
	cfg := &w.s.cfg
	body, idx := b.body, []int(nil) // idx: the batch's actions in body (nil: all)
	for try := 1; ; try++ {
		n := len(b.actions)
		if idx != nil {
			n = len(idx)
		}
		var data []byte
		err := w.cl.retry(ctx, fmt.Sprintf("opensearch sink: bulk request of %d actions", n), func(err error) {
			w.m.retries.Inc()
			w.log.Warn("opensearch: bulk request failed; retrying", "actions", n, "error", err)
		}, func() error {
			w.m.requests.Inc()
			w.m.bytesOut.Add(int64(len(body)))
			start := time.Now()
			var err error
			data, err = w.cl.be.bulk(ctx, body, w.s.cfg.refresh)
			w.m.latency.set(time.Since(start))
			return err
		})
		if err != nil {
			return err
		}
		if bytes.HasPrefix(data, noErrors) {
			return nil
		}
		var resp bulkResponse
		if err := json.Unmarshal(data, &resp); err != nil {
			return fmt.Errorf("opensearch sink: the bulk response does not parse: %w", err)
		}
		if !resp.Errors {
			return nil
		}
		if len(resp.Items) != n {
			return fmt.Errorf("opensearch sink: the bulk response has %d items for %d actions", len(resp.Items), n)
		}
		var again []int
		var firstAgain *ItemError
		var dead []Action // dead letters for DeadLetterIndex
		for i, m := range resp.Items {
			ai := i
			if idx != nil {
				ai = idx[i]
			}
			a := &b.actions[ai]
			var it bulkItem
			for _, v := range m {
				it = v
			}
			if it.Error == nil && it.Status < 400 || it.Error == nil && it.Status == http.StatusNotFound {
				continue
			}
			ie := &ItemError{Op: a.Op, Index: a.Index, ID: a.ID, Status: it.Status}
			if it.Error != nil {
				ie.Type, ie.Reason = it.Error.Type, it.Error.Reason
				if it.Error.CausedBy != nil {
					ie.Reason += " (caused by " + it.Error.CausedBy.Type + ": " + it.Error.CausedBy.Reason + ")"
				}
			}
			switch {
			case it.Status == http.StatusConflict && (a.ExternalVersion || a.Op == Create && a.ID != ""):
				// A replay: the document is there already (create) or at
				// this version or a newer one (external version).
				w.m.conflicts.Inc()
			case it.Status == http.StatusTooManyRequests || it.Status >= 500:
				if it.Status == http.StatusTooManyRequests {
					w.m.rejected.Inc()
				}
				again = append(again, ai)
				if firstAgain == nil {
					firstAgain = ie
				}
			default:
				w.m.failures.Inc()
				if cfg.dlIndex != "" {
					dead = append(dead, deadLetterAction(cfg.dlIndex, a, ie))
					continue
				}
				if err := w.route(ctx, a, ie); err != nil {
					return err
				}
			}
		}
		if len(dead) > 0 {
			if err := w.writeDeadLetters(ctx, dead); err != nil {
				return err
			}
		}
		if len(again) == 0 {
			return nil
		}
		if try >= cfg.conn.maxTries {
			return fmt.Errorf("opensearch sink: %d documents still rejected after %d tries: first: %w", len(again), try, firstAgain)
		}
		w.m.itemRetries.Add(int64(len(again)))
		if err := sleep(ctx, cfg.conn.backoff(try)); err != nil {
			return fmt.Errorf("opensearch sink: retrying %d rejected documents: %w", len(again), err)
		}
		var nb []byte
		for _, ai := range again {
			end := len(b.body)
			if ai+1 < len(b.offsets) {
				end = b.offsets[ai+1]
			}
			nb = append(nb, b.body[b.offsets[ai]:end]...)
		}
		body, idx = nb, again
	}
}

// route applies the item failure policy.
func (w *writer[T]) route(ctx context.Context, a *Action, ie *ItemError) error {
	switch w.s.cfg.policy {
	case DeadLetter:
		if err := w.s.cfg.deadLetter(ctx, *a, ie); err != nil {
			return fmt.Errorf("opensearch sink: the dead-letter function failed for %v: %w", ie, err)
		}
		w.m.deadLettered.Inc()
		return nil
	case Drop:
		w.m.dropped.Inc()
		w.errMu.Lock()
		logIt := time.Since(w.lastLog) >= 10*time.Second
		if logIt {
			w.lastLog = time.Now()
		}
		w.errMu.Unlock()
		if logIt {
			w.log.Warn("opensearch: document rejected and dropped (policy drop; logged at most every 10s, all counted in "+MetricDropped+")", "error", ie.Error())
		}
		return nil
	default:
		return ie
	}
}

// deadLetterAction is the dead letter of a rejected action, for
// DeadLetterIndex: its id is derived from the action's index and id, so
// a replay rewrites it.
func deadLetterAction(index string, a *Action, ie *ItemError) Action {
	doc, _ := json.Marshal(map[string]any{
		"index": a.Index, "id": a.ID, "op": a.Op.String(), "status": ie.Status,
		"error_type": ie.Type, "reason": ie.Reason, "document": string(a.Doc),
	})
	dl := Action{Op: Index, Index: index, Doc: doc}
	if a.ID != "" {
		dl.ID = a.Index + "/" + a.ID
		if len(dl.ID) > 512 {
			sum := sha256.Sum256([]byte(dl.ID))
			dl.ID = hex.EncodeToString(sum[:])
		}
	}
	return dl
}

// writeDeadLetters writes dead letters to the DeadLetterIndex in one bulk
// request, with retries; a dead letter the node rejects fails the job.
func (w *writer[T]) writeDeadLetters(ctx context.Context, dead []Action) error {
	var body []byte
	for i := range dead {
		var err error
		if body, err = dead[i].appendTo(body); err != nil {
			return fmt.Errorf("opensearch sink: dead letter of id %q: %w", dead[i].ID, err)
		}
	}
	what := fmt.Sprintf("opensearch sink: writing %d dead letters to index %q", len(dead), w.s.cfg.dlIndex)
	var data []byte
	err := w.cl.retry(ctx, what, func(err error) {
		w.m.retries.Inc()
		w.log.Warn("opensearch: dead-letter request failed; retrying", "error", err)
	}, func() error {
		w.m.requests.Inc()
		w.m.bytesOut.Add(int64(len(body)))
		var err error
		data, err = w.cl.be.bulk(ctx, body, w.s.cfg.refresh)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if bytes.HasPrefix(data, noErrors) {
		w.m.deadLettered.Add(int64(len(dead)))
		return nil
	}
	var resp bulkResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return fmt.Errorf("%s: the bulk response does not parse: %w", what, err)
	}
	for i, m := range resp.Items {
		for _, it := range m {
			if it.Error != nil || it.Status >= 300 {
				ie := &ItemError{Op: Index, Index: w.s.cfg.dlIndex, Status: it.Status}
				if i < len(dead) {
					ie.ID = dead[i].ID
				}
				if it.Error != nil {
					ie.Type, ie.Reason = it.Error.Type, it.Error.Reason
				}
				return fmt.Errorf("%s: %w", what, ie)
			}
		}
	}
	w.m.deadLettered.Add(int64(len(dead)))
	return nil
}
