package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type kafka struct {
	brokers []string
	cl      *kgo.Client
	adm     *kadm.Client
}

func newKafka(brokers []string) (*kafka, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	return &kafka{brokers: brokers, cl: cl, adm: kadm.NewClient(cl)}, nil
}

func (k *kafka) close() { k.cl.Close() }

// total returns the sum of the end offsets of topic's partitions and
// whether the topic exists.
func (k *kafka) total(ctx context.Context, topic string) (int64, bool, error) {
	ends, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, false, err
	}
	var sum int64
	exists := true
	var ferr error
	ends.Each(func(o kadm.ListedOffset) {
		switch {
		case errors.Is(o.Err, kerr.UnknownTopicOrPartition):
			exists = false
		case o.Err != nil:
			ferr = o.Err
		default:
			sum += o.Offset
		}
	})
	if len(ends) == 0 {
		exists = false
	}
	return sum, exists, ferr
}

// ensureInput makes sure the input topic holds exactly the benchmark's
// records, producing them once; a topic from an earlier run of the same
// size is reused.
func ensureInput(ctx context.Context, k *kafka, o *options, out io.Writer) (string, error) {
	age := ""
	if o.tsAge > 0 {
		age = "-old"
	}
	topic := fmt.Sprintf("bench-in-%s-%dx%d-p%d%s", inputVersion, o.records, o.valueSize, o.partitions, age)
	schemaID := 0
	if o.format == "avro" {
		// The schema id is part of the values and so of the topic's name:
		// a topic written under another registry's id is not reused.
		id, err := registerAvro(ctx, o.registry, "bench-in-"+inputVersion+"-avro-value")
		if err != nil {
			return "", err
		}
		schemaID = id
		topic = fmt.Sprintf("bench-in-%s-avro%d-%dx%d-p%d%s", inputVersion, id, o.records, o.valueSize, o.partitions, age)
	}
	n, exists, err := k.total(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("input topic %s: %w", topic, err)
	}
	if exists && n == int64(o.records) {
		fmt.Fprintf(out, "input: reusing topic %s (%d records)\n", topic, n)
		return topic, nil
	}
	if exists {
		if err := k.deleteTopic(ctx, topic); err != nil {
			return "", err
		}
	}
	if err := k.createTopic(ctx, topic, o.partitions, nil); err != nil {
		return "", err
	}
	start := time.Now()
	p, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.Lz4Compression()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100_000),
	)
	if err != nil {
		return "", err
	}
	defer p.Close()
	var perr atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			perr.CompareAndSwap(nil, &err)
		}
	}
	ts := time.Now().Add(-o.tsAge)
	for i := range o.records {
		if e := perr.Load(); e != nil {
			return "", fmt.Errorf("producing the input: %w", *e)
		}
		v := make([]byte, 0, o.valueSize+1)
		if o.format == "avro" {
			v = avroValue(v, i, o.valueSize, schemaID)
		} else {
			v = value(v, i, o.valueSize)
		}
		r := &kgo.Record{Value: v, Partition: int32(i % o.partitions)}
		if o.tsAge > 0 {
			r.Timestamp = ts
		}
		p.Produce(ctx, r, promise)
	}
	if err := p.Flush(ctx); err != nil {
		return "", fmt.Errorf("producing the input: %w", err)
	}
	if e := perr.Load(); e != nil {
		return "", fmt.Errorf("producing the input: %w", *e)
	}
	// A new topic's end offsets may lag behind its metadata for a moment:
	// ask again (bounded) until they show every record.
	for try := 0; ; try++ {
		n, _, err = k.total(ctx, topic)
		if err == nil && n == int64(o.records) {
			break
		}
		if try == 20 {
			if err != nil {
				return "", fmt.Errorf("input topic %s: %w", topic, err)
			}
			return "", fmt.Errorf("input topic %s holds %d records, want %d", topic, n, o.records)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "input: produced %d records to %s in %v\n", n, topic, time.Since(start).Round(time.Millisecond))
	return topic, nil
}

func (k *kafka) createTopic(ctx context.Context, topic string, partitions int, configs map[string]*string) error {
	resp, err := k.adm.CreateTopic(ctx, int32(partitions), 1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	return nil
}

// waitTopic waits (bounded) until every partition of a topic just
// created has an end offset: a new topic can be missing from a broker's
// metadata for a moment after CreateTopics returned.
func (k *kafka) waitTopic(ctx context.Context, topic string, partitions int) error {
	var last error
	for range 40 {
		ends, err := k.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		n := 0
		if err == nil {
			ends.Each(func(kadm.ListedOffset) { n++ })
			if n == partitions {
				return nil
			}
			err = fmt.Errorf("%d of %d partitions listed", n, partitions)
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("topic %s not ready after 10s: %w", topic, last)
}

func (k *kafka) deleteTopic(ctx context.Context, topic string) error {
	resp, err := k.adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("delete topic %s: %w", topic, err)
	}
	return nil
}

// readBack is what the read_committed reader found in an output topic.
type readBack struct {
	hashes     []uint64 // sorted
	appendMS   []int64  // broker append times (LogAppendTime), sorted
	wrongTSTyp int      // records whose timestamp is not LogAppendTime
	badHeader  int      // Avro: values without the wire format's header
}

// readOutput reads every committed record of topic. It stops once it has
// want records and every partition is read up to its last transaction
// marker (end offset - 2 is the last data record of a committed
// transaction), or when nothing came for idle (then extra records would
// have been seen; missing ones are reported by the caller), or at timeout.
func (k *kafka) readOutput(ctx context.Context, topic, format string, want int, timeout time.Duration) (*readBack, error) {
	ends, err := k.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, err
	}
	hwm := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { hwm[o.Partition] = o.Offset })
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(k.brokers...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	rb := &readBack{hashes: make([]uint64, 0, want), appendMS: make([]int64, 0, want)}
	maxSeen := map[int32]int64{}
	complete := func() bool {
		if len(rb.hashes) < want {
			return false
		}
		for p, end := range hwm {
			if end == 0 {
				continue
			}
			if s, ok := maxSeen[p]; !ok || s+2 < end {
				return false
			}
		}
		return true
	}
	const idle = 5 * time.Second
	deadline := time.Now().Add(timeout)
	lastRecord := time.Now()
	for !complete() {
		now := time.Now()
		if now.After(deadline) {
			return rb.sorted(), fmt.Errorf("reading %s: %d records after %v, want %d", topic, len(rb.hashes), timeout, want)
		}
		if now.Sub(lastRecord) > idle {
			break // nothing more is coming: the caller compares what it has
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = errors.Join(ferr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			lastRecord = time.Now()
			v := r.Value
			if format == "avro" {
				if len(v) < avroHeader || v[0] != 0 {
					rb.badHeader++
				} else {
					v = v[avroHeader:]
				}
			}
			rb.hashes = append(rb.hashes, hash(v))
			rb.appendMS = append(rb.appendMS, r.Timestamp.UnixMilli())
			if r.Attrs.TimestampType() != 1 {
				rb.wrongTSTyp++
			}
			maxSeen[r.Partition] = r.Offset // offsets rise within a partition
		})
	}
	return rb.sorted(), nil
}

func (rb *readBack) sorted() *readBack {
	slices.Sort(rb.hashes)
	slices.Sort(rb.appendMS)
	return rb
}

// steadyRate is the output rate between the 10th and the 90th percentile
// of the broker append times, in records per second; 0 when the span is
// too short to tell (under 50 ms).
func steadyRate(appendMS []int64) float64 {
	n := len(appendMS)
	if n < 10 {
		return 0
	}
	i10, i90 := n/10, n*9/10
	span := appendMS[i90] - appendMS[i10]
	if span < 50 {
		return 0
	}
	return float64(i90-i10) / (float64(span) / 1000)
}

// firstRecordMS is the start-up figure of a run: the milliseconds from
// the process's start (the driver's clock just before exec) to the broker
// append time (LogAppendTime, the same machine's clock) of the first
// output record: process and runtime start, configuration, connecting,
// metadata, transactional set-up, the first fetch and the first produce.
// -1 when there is no record. The broker's clock has millisecond
// resolution, so the figure is ±1 ms.
func firstRecordMS(start time.Time, sortedAppendMS []int64) float64 {
	if len(sortedAppendMS) == 0 {
		return -1
	}
	return float64(sortedAppendMS[0]) - float64(start.UnixMicro())/1000
}
