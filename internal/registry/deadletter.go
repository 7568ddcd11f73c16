package registry

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Policy is what a pipeline does with a record that fails: a record a
// source cannot decode, or one a transform fails on.
type Policy string

const (
	// PolicyFail fails the job at once, without restarts (the record
	// would fail again), naming the operator, the position where known and
	// an excerpt of the record. It is the default.
	PolicyFail Policy = "fail"
	// PolicySkip drops the record, counts it (numRecordsSkipped, or the
	// source's numRecordsInErrors) and logs it at a bounded rate.
	PolicySkip Policy = "skip"
	// PolicyDeadLetter sends a dead letter (the error, the operator, the
	// position and the original record or bytes) to the pipeline's
	// dead-letter sink, exactly once with the main output.
	PolicyDeadLetter Policy = "dead-letter"
)

// Policies are the allowed values of on-error and on-malformed.
var Policies = []string{string(PolicyFail), string(PolicySkip), string(PolicyDeadLetter)}

// DeadLetter is a record that failed, on its way to the dead-letter sink.
// [DeadLetter.Record] renders it as the record that sink writes.
type DeadLetter struct {
	Error    string // what went wrong
	Operator string // the operator that failed: the source or transform name
	Split    string // the source split, where known
	File     string // the source file, where known
	Offset   int64  // the byte offset in File or the split; -1 when unknown
	Raw      []byte // the original bytes (records a source could not decode)
	Input    any    // the value of the record the transform failed on; nil = none
}

// MarkDeadLetter returns a record that carries d through a source's
// output; [DeadLetterOf] finds it again. The mark is the record's value
// being the *DeadLetter, which no decoded value is, so input cannot forge
// it.
func MarkDeadLetter(d *DeadLetter) Record { return Record{val: d} }

// DeadLetterOf returns the dead letter r carries, if any.
func DeadLetterOf(r Record) (*DeadLetter, bool) {
	d, ok := r.val.(*DeadLetter)
	return d, ok
}

// Record renders the dead letter as the record the dead-letter sink
// writes: "error", "operator", and where known "split", "file", "offset",
// "record" (the input record of a failed transform) and "raw" (the bytes
// a source could not decode, as a string if they are valid UTF-8, else as
// "raw_base64").
func (d *DeadLetter) Record() Record { return NewRecord(d.Object()) }

// Object is the value of [DeadLetter.Record].
func (d *DeadLetter) Object() map[string]any {
	r := map[string]any{"error": d.Error, "operator": d.Operator}
	if d.Split != "" {
		r["split"] = d.Split
	}
	if d.File != "" {
		r["file"] = d.File
	}
	if d.Offset >= 0 {
		r["offset"] = d.Offset
	}
	if d.Input != nil {
		r["record"] = d.Input
	}
	if d.Raw != nil {
		if utf8.Valid(d.Raw) {
			r["raw"] = string(d.Raw)
		} else {
			r["raw_base64"] = base64.StdEncoding.EncodeToString(d.Raw)
		}
	}
	return r
}

// Position is where a source read a record: what a dead letter of a
// transform names, as a source's own dead letters do.
type Position struct {
	Split  string // the source split; "" for Kafka, see Topic
	File   string // the source file, where known
	Topic  string // a Kafka record's topic, "" otherwise
	Offset int64  // the byte offset in File, or the split's offset
	// Partition is a Kafka record's. Its split name (<topic>-<partition>)
	// is made only when needed (SplitName), not for every record read.
	Partition int32
}

// SplitName is the split: Split, or <topic>-<partition> for Kafka.
func (p *Position) SplitName() string {
	if p.Split == "" && p.Topic != "" {
		return p.Topic + "-" + strconv.Itoa(int(p.Partition))
	}
	return p.Split
}

// String names the position for an error message: `topic "t" partition
// 1 offset 42` (Kafka), `file in/a.jsonl offset 25`, or `split s offset
// 7`.
func (p *Position) String() string { return p.Describe(0) }

// Describe is String with the line of File where it is known (line > 0):
// `file in/a.jsonl line 2 (offset 25)`.
func (p *Position) Describe(line int64) string {
	off := "offset " + strconv.FormatInt(p.Offset, 10)
	switch {
	case p.Split == "" && p.Topic != "":
		return "topic " + strconv.Quote(p.Topic) + " partition " + strconv.Itoa(int(p.Partition)) + " " + off
	case p.File != "" && line > 0:
		return "file " + p.File + " line " + strconv.FormatInt(line, 10) + " (" + off + ")"
	case p.File != "":
		return "file " + p.File + " " + off
	}
	return "split " + p.Split + " " + off
}

// Line looks up the number (from 1) of File's line at Offset, for an
// error message: it reads File up to Offset again. 0 if p names no file
// or it cannot be read.
func (p *Position) Line() int64 {
	if p.File == "" {
		return 0
	}
	return file.LineAt(p.File, p.Offset)
}

// PosRef is where a source read a record as it attached it: a *Position,
// or the Kafka record itself (which has its topic, partition and offset,
// so attaching it allocates nothing), resolved into a Position only when
// a record fails. The zero PosRef is no position.
type PosRef struct{ v any }

// Known reports whether p holds a position.
func (p PosRef) Known() bool { return p.v != nil }

// Resolve returns the position p refers to, nil if none.
func (p PosRef) Resolve() *Position {
	switch v := p.v.(type) {
	case *Position:
		return v
	case *kgo.Record:
		return &Position{Topic: v.Topic, Partition: v.Partition, Offset: v.Offset}
	}
	return nil
}

// WithPosition returns r carrying p; [TakePosition] finds it again.
func WithPosition(r Record, p Position) Record { return r.WithPos(PosRef{&p}) }

// WithKafkaPosition returns r carrying rec's topic, partition and offset,
// by reference to rec.
func WithKafkaPosition(r Record, rec *kgo.Record) Record { return r.WithPos(PosRef{rec}) }

// PutPosition returns r carrying p (a step that passes a position on); r
// unchanged if p is not Known.
func PutPosition(r Record, p PosRef) Record {
	if p.v == nil {
		return r
	}
	return r.WithPos(p)
}

// TakePosition returns the position r carries, if any. (A position is a
// field of the record that expressions and sinks never see, so nothing
// needs to be removed.)
func TakePosition(r Record) PosRef { return r.pos }
