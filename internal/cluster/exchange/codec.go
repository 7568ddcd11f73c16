package exchange

import (
	"fmt"

	"github.com/sluice-io/sluice/internal/cluster/grpcframe"
	"github.com/sluice-io/sluice/serde"
)

// Codec encodes the records of one edge for the wire. Implementations
// must be safe for use by one goroutine at a time per Sender or Receiver
// (a Sender encodes on the caller's goroutine, a Receiver decodes on its
// stream's goroutine); a codec shared by several channels must be safe
// for concurrent use.
type Codec[T any] interface {
	// Append appends the encoding of v to dst and returns the extended
	// slice. It must not keep dst.
	Append(dst []byte, v T) ([]byte, error)
	// Decode returns the record encoded in b. b is not reused by the
	// exchange: the record may refer to it.
	Decode(b []byte) (T, error)
}

// CodecFuncs adapts two functions to a [Codec].
type CodecFuncs[T any] struct {
	AppendFunc func(dst []byte, v T) ([]byte, error)
	DecodeFunc func(b []byte) (T, error)
}

// Append calls c.AppendFunc.
func (c CodecFuncs[T]) Append(dst []byte, v T) ([]byte, error) { return c.AppendFunc(dst, v) }

// Decode calls c.DecodeFunc.
func (c CodecFuncs[T]) Decode(b []byte) (T, error) { return c.DecodeFunc(b) }

// FromVersioned returns a codec over a versioned serializer: each record
// is framed with its serializer version (serde.Marshal), so receivers of a
// newer build still read it. It allocates per record; write a Codec for
// hot edges.
func FromVersioned[T any](s serde.Versioned[T]) Codec[T] {
	return CodecFuncs[T]{
		AppendFunc: func(dst []byte, v T) ([]byte, error) {
			b, err := serde.Marshal(s, v)
			if err != nil {
				return dst, err
			}
			return append(dst, b...), nil
		},
		DecodeFunc: func(b []byte) (T, error) { return serde.Unmarshal(s, b) },
	}
}

// BytesCodec passes []byte records as they are (Decode returns a slice of
// the received frame, not a copy).
type BytesCodec struct{}

// Append appends v.
func (BytesCodec) Append(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }

// Decode returns b.
func (BytesCodec) Decode(b []byte) ([]byte, error) { return b, nil }

// checkCodec returns ErrNoCodec naming ch when c is nil.
func checkCodec[T any](c Codec[T], ch ChannelID) error {
	if c == nil {
		return fmt.Errorf("%w: %v (give the edge a codec: exchange.Codec, serde.Versioned via FromVersioned, or the CLI record codec)", ErrNoCodec, ch)
	}
	return nil
}

// wireCodecName is the gRPC content-subtype of the exchange's frames
// ("application/grpc+sluice-exchange"), registered with gRPC in init
// (grpcframe.RegisterCodec: frames as raw bytes).
const wireCodecName = "sluice-exchange"

func init() { grpcframe.RegisterCodec(wireCodecName) }
