package serde

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
)

// Versioned serializes values of type T and stamps them with a version.
//
// Deserialize must accept every version this serializer ever wrote, not only
// the current one: checkpoints outlive code.
type Versioned[T any] interface {
	// Version is the version Serialize writes. It must be positive.
	Version() int
	// Serialize encodes v in the current version.
	Serialize(v T) ([]byte, error)
	// Deserialize decodes data that was written with the given version.
	// It returns an error wrapping ErrUnknownVersion for a version it
	// cannot read.
	Deserialize(version int, data []byte) (T, error)
}

// ErrUnknownVersion is wrapped by errors from Deserialize when the data's
// version is newer than, or otherwise unknown to, the serializer.
var ErrUnknownVersion = errors.New("serde: unknown serializer version")

// ErrCorrupt is wrapped by Unmarshal when framed data is too short to hold a
// version header.
var ErrCorrupt = errors.New("serde: corrupt framed data")

// Marshal serializes v with s and prefixes the result with s.Version() as a
// 4-byte big-endian integer, so that Unmarshal can pick the right decoder.
func Marshal[T any](s Versioned[T], v T) ([]byte, error) {
	body, err := s.Serialize(v)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(out, uint32(s.Version()))
	copy(out[4:], body)
	return out, nil
}

// Unmarshal reverses Marshal: it reads the version header and hands the rest
// to s.Deserialize.
func Unmarshal[T any](s Versioned[T], data []byte) (T, error) {
	var zero T
	if len(data) < 4 {
		return zero, fmt.Errorf("%w: %d bytes, need at least 4", ErrCorrupt, len(data))
	}
	return s.Deserialize(int(binary.BigEndian.Uint32(data)), data[4:])
}

// MarshalAll marshals every value of vs, in order.
func MarshalAll[T any](s Versioned[T], vs []T) ([][]byte, error) {
	out := make([][]byte, 0, len(vs))
	for i, v := range vs {
		b, err := Marshal(s, v)
		if err != nil {
			return nil, fmt.Errorf("serialize item %d: %w", i, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// UnmarshalAll unmarshals every element of data, in order.
func UnmarshalAll[T any](s Versioned[T], data [][]byte) ([]T, error) {
	out := make([]T, 0, len(data))
	for i, b := range data {
		v, err := Unmarshal(s, b)
		if err != nil {
			return nil, fmt.Errorf("deserialize item %d: %w", i, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// JSON returns a serializer that encodes values with encoding/json and
// writes the given version. It reads only that version; wrap it, or write
// your own Versioned, once the encoding changes.
func JSON[T any](version int) Versioned[T] {
	if version <= 0 {
		panic("serde.JSON: version must be positive")
	}
	return jsonSerde[T]{version: version}
}

type jsonSerde[T any] struct{ version int }

func (j jsonSerde[T]) Version() int { return j.version }

func (j jsonSerde[T]) Serialize(v T) ([]byte, error) { return json.Marshal(v) }

func (j jsonSerde[T]) Deserialize(version int, data []byte) (T, error) {
	var v T
	if version != j.version {
		return v, fmt.Errorf("%w: got %d, can read %d", ErrUnknownVersion, version, j.version)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return v, fmt.Errorf("serde: decode version %d: %w", version, err)
	}
	return v, nil
}

// Func builds a Versioned from two functions, for serializers that need no
// type of their own.
func Func[T any](version int, ser func(T) ([]byte, error), de func(version int, data []byte) (T, error)) Versioned[T] {
	return funcSerde[T]{version, ser, de}
}

type funcSerde[T any] struct {
	version int
	ser     func(T) ([]byte, error)
	de      func(int, []byte) (T, error)
}

func (f funcSerde[T]) Version() int                                 { return f.version }
func (f funcSerde[T]) Serialize(v T) ([]byte, error)                { return f.ser(v) }
func (f funcSerde[T]) Deserialize(version int, b []byte) (T, error) { return f.de(version, b) }
