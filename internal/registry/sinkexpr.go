package registry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// The Kafka sink's expressions for the key, headers, partition and
// timestamp of what it writes (each unset by default: the record's key,
// headers and timestamp as read, and the partitioner's choice).
var kafkaSinkExprOptions = []Option{
	{Name: "key", Type: String,
		Description: "expression for the key of each record written (a string or bytes; other values in key.format; nil = no key); default: the record's key as read (none for records not from Kafka)"},
	{Name: "headers", Type: String,
		Description: "expression for the headers of each record written: an object of name → string or bytes; default: the record's headers as read"},
	{Name: "partition", Type: String,
		Description: "expression for the partition of each record written (an integer; every record needs one); default: sink.partitioner chooses"},
	{Name: "timestamp", Type: String,
		Description: "expression for the timestamp of each record written (integer milliseconds since the epoch, or a time); default: the record's timestamp as read, else the time it is written"},
}

var sinkExprNames = []string{"key", "headers", "partition", "timestamp"}

// sinkExprs are a Kafka sink's compiled expressions; nil = unset.
type sinkExprs struct {
	key, headers, partition, timestamp *Expr
	topic                              string // the sink's: keys are encoded for it (subject <topic>-key)
}

func compileSinkExprs(o Options) (*sinkExprs, error) {
	e := sinkExprs{topic: o.String("topic")}
	for _, n := range sinkExprNames {
		src := o.String(n)
		if src == "" {
			continue
		}
		x, err := CompileExpr(src, false)
		if err != nil {
			return nil, &OptionError{Option: n, Err: err}
		}
		switch n {
		case "key":
			e.key = x
		case "headers":
			e.headers = x
		case "partition":
			e.partition = x
		case "timestamp":
			e.timestamp = x
		}
	}
	return &e, nil
}

func validateSinkExprs(o Options) error {
	if o.Has("partition") && o.String("partition") != "" && o.Has("sink.partitioner") && o.String("sink.partitioner") != "default" {
		return optErr("partition", "set either partition (an expression) or sink.partitioner, not both")
	}
	_, err := compileSinkExprs(o)
	return err
}

// kafkaSinkStep is the Kafka sink's Step: its expressions, then, for the
// formats whose encoding can refuse a value (the schema-registry formats
// and csv), the value's encoding; nil when there is neither. A value the
// format cannot hold (a string in a long field) thus fails the job at
// once naming the record's position, or goes where the pipeline's
// on-error says, instead of failing the sink's writer (restarting for
// nothing). An error of the registry itself is not the record's: the
// record is left to the sink, whose writer fails (and restarts). The
// encoding reads the value (so the source decodes it, and a dead letter
// holds it).
func kafkaSinkStep(name string, o Options) (func(Record) (Record, error), bool, error) {
	e, err := compileSinkExprs(o)
	if err != nil {
		return nil, false, err
	}
	vf, vopt := valueFormat(o)
	encode := slices.Contains(registryFormats, vf) || vf == "csv"
	if e.none() && !encode {
		return nil, false, nil
	}
	kf := o.String("key.format")
	if kf == "" {
		kf = "string"
	}
	kc, err := newCodec(o, format.Key, kf, "key.format")
	if err != nil {
		return nil, false, err
	}
	exprs := func(r Record) (Record, error) { return r, nil }
	if !e.none() {
		exprs = e.step(name, kc)
	}
	if !encode {
		return exprs, e.readsValue(), nil
	}
	vc, err := newCodec(o, format.Value, vf, vopt)
	if err != nil {
		return nil, false, err
	}
	topic := o.String("topic")
	pre := &Codecs{Value: preEncoded{Codec: vc, format: vf, topic: topic}}
	return func(r Record) (Record, error) {
		r, err := exprs(r)
		if err != nil {
			return r, err
		}
		b, err := encodeValue(context.Background(), vc, topic, nil, r)
		switch {
		case errors.Is(err, format.ErrRegistry):
			return r, nil // the sink's writer fails on it (and restarts)
		case err != nil:
			return r, &SinkExprError{Sink: name, Option: vopt, Pos: r.Pos().Resolve(), Err: err}
		}
		return r.withEncoded(b, pre), nil
	}, true, nil // reads the value: the source decodes it, and a dead letter holds it
}

// preEncoded marks the bytes of a record the Kafka sink's step encoded
// for one format and topic: the sink writes them unchanged. Its Identity
// is "", so no other sink passes them through.
type preEncoded struct {
	format.Codec
	format, topic string
}

func (preEncoded) Identity() string { return "" }

// preEncodedFor returns the bytes of r that a step encoded in format for
// topic.
func preEncodedFor(r Record, fmtName, topic string) ([]byte, bool) {
	b, c, ok := r.Bytes()
	if !ok {
		return nil, false
	}
	p, ok := c.(preEncoded)
	if !ok || p.format != fmtName || p.topic != topic {
		return nil, false
	}
	return b, true
}

func (e *sinkExprs) none() bool {
	return e.key == nil && e.headers == nil && e.partition == nil && e.timestamp == nil
}

// step applies the expressions to a record; its error is a
// *SinkExprError.
func (e *sinkExprs) step(sink string, keyCodec format.Codec) func(Record) (Record, error) {
	return func(r Record) (Record, error) {
		out, opt, err := e.apply(r, keyCodec)
		if err != nil {
			return r, &SinkExprError{Sink: sink, Option: opt, Pos: r.Pos().Resolve(), Err: err}
		}
		return out, nil
	}
}

// SinkExprError is the run-time failure of a sink's expression on one
// record. Like a transform's, it fails the job at once, without restarts.
type SinkExprError struct {
	Sink   string // the sink's name
	Option string // key, headers, partition or timestamp
	Pos    *Position
	Err    error
}

func (e *SinkExprError) Error() string {
	at := ""
	if e.Pos != nil {
		at = " at " + e.Pos.String()
	}
	return fmt.Sprintf("sink %q option %s%s: %v", e.Sink, e.Option, at, e.Err)
}

func (e *SinkExprError) Unwrap() error { return e.Err }

// Is reports the error as restart.ErrUnrecoverable.
func (e *SinkExprError) Is(target error) bool { return target == restart.ErrUnrecoverable }

// addTo returns in with the expressions applied (in itself when none is
// set), by an operator named <sink>-meta.
func (e *sinkExprs) addTo(in stream.DataStream[Record], sink string, keyCodec format.Codec) stream.DataStream[Record] {
	if e.none() {
		return in
	}
	return stream.TryMap(in, e.step(sink, keyCodec), stream.Name(sink+"-meta"))
}

func (e *sinkExprs) apply(r Record, keyCodec format.Codec) (Record, string, error) {
	if e.readsValue() {
		var err error
		if r, err = r.Decode(context.Background()); err != nil {
			return r, "key", err
		}
	}
	m := r.Meta()
	if e.key != nil {
		v, err := e.key.Run(r)
		if err != nil {
			return r, "key", err
		}
		switch k := v.(type) {
		case nil:
			m.Key = nil
		case string:
			m.Key = []byte(k)
		case []byte:
			m.Key = k
		default:
			if m.Key, err = keyCodec.Encode(context.Background(), e.topic, nil, v); err != nil {
				return r, "key", err
			}
		}
	}
	if e.headers != nil {
		v, err := e.headers.Run(r)
		if err != nil {
			return r, "headers", err
		}
		obj, ok := v.(map[string]any)
		if !ok && v != nil {
			return r, "headers", fmt.Errorf("returned a %s, want an object of name → string", format.KindOf(v))
		}
		m.Headers = make([]Header, 0, len(obj))
		for name, hv := range obj {
			switch x := hv.(type) {
			case string:
				m.Headers = append(m.Headers, Header{Key: name, Value: []byte(x)})
			case []byte:
				m.Headers = append(m.Headers, Header{Key: name, Value: x})
			case nil:
				m.Headers = append(m.Headers, Header{Key: name})
			default:
				return r, "headers", fmt.Errorf("header %q is a %s, want a string or bytes", name, format.KindOf(hv))
			}
		}
	}
	if e.partition != nil {
		v, err := e.partition.Run(r)
		if err != nil {
			return r, "partition", err
		}
		p, ok := v.(int)
		if !ok {
			var n int64
			if n, ok = v.(int64); ok {
				p = int(n)
			}
		}
		if !ok || p < 0 || p > math.MaxInt32 {
			return r, "partition", fmt.Errorf("returned %v (%s), want an integer from 0", v, format.KindOf(v))
		}
		m.Partition = int32(p)
	}
	if e.timestamp != nil {
		v, err := e.timestamp.Run(r)
		if err != nil {
			return r, "timestamp", err
		}
		switch t := v.(type) {
		case int:
			m.Timestamp = time.UnixMilli(int64(t))
		case int64:
			m.Timestamp = time.UnixMilli(t)
		case float64:
			m.Timestamp = time.UnixMilli(int64(t))
		case time.Time:
			m.Timestamp = t
		default:
			return r, "timestamp", errors.New("want integer milliseconds since the epoch or a time, got a " + format.KindOf(v))
		}
	}
	return r.WithMeta(m), "", nil
}

func (e *sinkExprs) readsValue() bool {
	for _, x := range []*Expr{e.key, e.headers, e.partition, e.timestamp} {
		if x != nil && x.ReadsValue() {
			return true
		}
	}
	return false
}
