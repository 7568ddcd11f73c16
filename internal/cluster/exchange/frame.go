package exchange

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ChannelID names one channel: the records one producer subtask sends to
// one consumer subtask over one edge of one job.
type ChannelID struct {
	Job  string // the job (pipeline) name
	Edge string // the edge: e.g. "<producer vertex>-><consumer vertex>"
	Src  int    // the producer subtask
	Dst  int    // the consumer subtask
}

func (c ChannelID) String() string {
	return fmt.Sprintf("channel %s/%s[%d->%d]", c.Job, c.Edge, c.Src, c.Dst)
}

// Epoch is the run of a channel's tasks: the job's attempt (it grows with
// every global failover) and the generation of the region that owns the
// channel (it grows with every regional restart). Epochs compare
// lexicographically; a receiver refuses senders of an older epoch, so a
// sender left over from a failed attempt can never feed a new one.
type Epoch struct {
	Attempt    uint64
	Generation uint64
}

// Less reports whether e is older than o.
func (e Epoch) Less(o Epoch) bool {
	return e.Attempt < o.Attempt || e.Attempt == o.Attempt && e.Generation < o.Generation
}

func (e Epoch) String() string {
	return fmt.Sprintf("attempt %d generation %d", e.Attempt, e.Generation)
}

// Kind is what a [Message] (or an [Event]) is.
type Kind uint8

// The kinds, in the order of the wire's item tags.
const (
	KindRecords   Kind = 1 + iota // a batch of records
	KindWatermark                 // Value is the watermark
	KindIdle                      // the producer is idle
	KindBarrier                   // Value is the checkpoint id
	KindEnd                       // end of partition: the producer has no more records
)

func (k Kind) String() string {
	switch k {
	case KindRecords:
		return "records"
	case KindWatermark:
		return "watermark"
	case KindIdle:
		return "idle"
	case KindBarrier:
		return "barrier"
	case KindEnd:
		return "end"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is a control message that travels in line with records.
type Event struct {
	Kind  Kind
	Value int64 // the watermark or checkpoint id
}

// Watermark returns a watermark event.
func Watermark(ts int64) Event { return Event{Kind: KindWatermark, Value: ts} }

// Barrier returns the barrier of checkpoint id.
func Barrier(id int64) Event { return Event{Kind: KindBarrier, Value: id} }

// Idle returns an idleness event.
func Idle() Event { return Event{Kind: KindIdle} }

// EndOfPartition returns the end-of-partition event.
func EndOfPartition() Event { return Event{Kind: KindEnd} }

// Message is what a [Receiver] delivers: a batch of records or an event.
type Message[T any] struct {
	Kind    Kind
	Records []T   // KindRecords: the batch (owned by the caller)
	Value   int64 // KindWatermark, KindBarrier
}

// Wire format. Every gRPC message is one frame; its first byte is its
// type. Integers are uvarints unless said otherwise; strings are a
// uvarint length and the bytes.
//
//	hello  'H' version=1 job edge src dst attempt generation   sender → receiver, first
//	accept 'A' credits                                           receiver → sender, reply to hello
//	credit 'C' credits                                           receiver → sender, more credits
//	data   'D' item...                                           sender → receiver, costs one credit
//
// Items of a data frame, in order:
//
//	records 1 count (len bytes)...   at most one per frame
//	watermark 2 int64 (8 bytes, little endian: rewritten in place when coalesced)
//	idle 3 | barrier 4 varint id | end 5
const (
	frameHello  = 'H'
	frameAccept = 'A'
	frameCredit = 'C'
	frameData   = 'D'

	wireVersion = 1
)

type hello struct {
	ch    ChannelID
	epoch Epoch
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (h hello) append(b []byte) []byte {
	b = append(b, frameHello)
	b = binary.AppendUvarint(b, wireVersion)
	b = appendString(b, h.ch.Job)
	b = appendString(b, h.ch.Edge)
	b = binary.AppendUvarint(b, uint64(h.ch.Src))
	b = binary.AppendUvarint(b, uint64(h.ch.Dst))
	b = binary.AppendUvarint(b, h.epoch.Attempt)
	return binary.AppendUvarint(b, h.epoch.Generation)
}

var errShort = errors.New("truncated")

// reader parses a frame; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes(n uint64) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.err = errShort
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

func (r *reader) int() int {
	v := r.uvarint()
	if v > math.MaxInt32 {
		r.err = fmt.Errorf("integer %d out of range", v)
		return 0
	}
	return int(v)
}

func (r *reader) fixed64() int64 {
	b := r.bytes(8)
	if b == nil {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(b))
}

func parseHello(b []byte) (hello, error) {
	if len(b) == 0 || b[0] != frameHello {
		return hello{}, errors.New("exchange: first frame is not a hello")
	}
	r := reader{b: b[1:]}
	if v := r.uvarint(); r.err == nil && v != wireVersion {
		return hello{}, fmt.Errorf("exchange: hello of wire version %d, this node speaks %d", v, wireVersion)
	}
	var h hello
	h.ch.Job = string(r.bytes(r.uvarint()))
	h.ch.Edge = string(r.bytes(r.uvarint()))
	h.ch.Src = r.int()
	h.ch.Dst = r.int()
	h.epoch.Attempt = r.uvarint()
	h.epoch.Generation = r.uvarint()
	if r.err != nil {
		return hello{}, fmt.Errorf("exchange: malformed hello: %w", r.err)
	}
	return h, nil
}

// parseCredits parses an accept or credit frame.
func parseCredits(b []byte, want byte) (int, error) {
	if len(b) == 0 || b[0] != want {
		return 0, fmt.Errorf("exchange: got a frame of type %q, want %q", firstByte(b), want)
	}
	r := reader{b: b[1:]}
	n := r.int()
	if r.err != nil {
		return 0, fmt.Errorf("exchange: malformed credit frame: %w", r.err)
	}
	return n, nil
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func appendCredits(b []byte, typ byte, n int) []byte {
	b = append(b, typ)
	return binary.AppendUvarint(b, uint64(n))
}

// appendRecord appends v with a uvarint length prefix. It reserves one
// byte for the length and moves the encoding when it needs more.
func appendRecord[T any](dst []byte, c Codec[T], v T) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0)
	dst, err := c.Append(dst, v)
	if err != nil {
		return dst[:start], err
	}
	n := len(dst) - start - 1
	if n < 0x80 {
		dst[start] = byte(n)
		return dst, nil
	}
	var tmp [binary.MaxVarintLen64]byte
	k := binary.PutUvarint(tmp[:], uint64(n))
	dst = append(dst, tmp[:k-1]...) // grow by k-1
	copy(dst[start+k:], dst[start+1:start+1+n])
	copy(dst[start:], tmp[:k])
	return dst, nil
}

// parseData decodes a data frame into messages. It returns the number of
// records too.
func parseData[T any](b []byte, c Codec[T]) ([]Message[T], int, error) {
	if len(b) == 0 || b[0] != frameData {
		return nil, 0, fmt.Errorf("exchange: got a frame of type %q, want data", firstByte(b))
	}
	r := reader{b: b[1:]}
	var msgs []Message[T]
	nrec := 0
	for len(r.b) > 0 && r.err == nil {
		tag := Kind(r.b[0])
		r.b = r.b[1:]
		switch tag {
		case KindRecords:
			n := r.int()
			if r.err != nil {
				break
			}
			if n > len(r.b) { // every record takes at least its length byte
				r.err = fmt.Errorf("record count %d exceeds the frame", n)
				break
			}
			recs := make([]T, n)
			for i := range n {
				rb := r.bytes(r.uvarint())
				if r.err != nil {
					break
				}
				v, err := c.Decode(rb)
				if err != nil {
					return nil, 0, fmt.Errorf("exchange: decode record %d of %d in a frame: %w", i, n, err)
				}
				recs[i] = v
			}
			msgs = append(msgs, Message[T]{Kind: KindRecords, Records: recs})
			nrec += n
		case KindWatermark:
			msgs = append(msgs, Message[T]{Kind: KindWatermark, Value: r.fixed64()})
		case KindBarrier:
			msgs = append(msgs, Message[T]{Kind: KindBarrier, Value: r.varint()})
		case KindIdle, KindEnd:
			msgs = append(msgs, Message[T]{Kind: tag})
		default:
			r.err = fmt.Errorf("unknown item tag %d", tag)
		}
	}
	if r.err != nil {
		return nil, 0, fmt.Errorf("exchange: malformed data frame: %w", r.err)
	}
	if len(msgs) == 0 {
		return nil, 0, errors.New("exchange: empty data frame")
	}
	return msgs, nrec, nil
}
