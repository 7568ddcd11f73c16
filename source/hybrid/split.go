package hybrid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/sluice-io/sluice/serde"
)

// Split is a split of one of the hybrid's sources, kept in that source's
// own serialized form: the hybrid cannot know every source's split type,
// and a reader restored from a checkpoint cannot decode a split before the
// enumerator told it which source object to use (see [Builder.AddSourceFactory]).
// It is Flink's HybridSourceSplit.
type Split struct {
	// Source is the position of the split's source in the chain, from 0.
	Source int
	// ID is the wrapped split's SplitID.
	ID string
	// Version and Data are the wrapped split, serialized with its
	// source's SplitSerializer.
	Version int
	Data    []byte
}

// SplitID returns "<source>:<wrapped split id>".
func (s Split) SplitID() string { return strconv.Itoa(s.Source) + ":" + s.ID }

// EnumState is the hybrid enumerator's checkpoint: the current source and
// its enumerator's state, serialized with that source's
// EnumeratorStateSerializer. Pending holds splits of earlier sources that
// were given back (AddSplitsBack) after their source was finished and not
// yet handed to a reader again.
type EnumState struct {
	Source  int
	Version int
	State   []byte
	Pending []Split
}

// ErrCorruptState is wrapped by the serializers' errors for data they
// cannot decode.
var ErrCorruptState = errors.New("hybrid: corrupt serialized state")

// serialVersion is the version the serializers write. Version 1:
//
//	split:      uvarint source, uvarint version, uvarint len(id), id, data (the rest)
//	enum state: uvarint source, uvarint version, uvarint len(state), state,
//	            uvarint count, count × (uvarint len(split), split)
const serialVersion = 1

var (
	splitSerde = serde.Func(serialVersion, encodeSplit, decodeSplit)
	stateSerde = serde.Func(serialVersion, encodeState, decodeState)
)

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendSplit(b []byte, s Split) []byte {
	b = binary.AppendUvarint(b, uint64(s.Source))
	b = binary.AppendUvarint(b, uint64(s.Version))
	b = appendBytes(b, []byte(s.ID))
	return append(b, s.Data...)
}

func encodeSplit(s Split) ([]byte, error) {
	if s.Source < 0 || s.Version < 0 {
		return nil, fmt.Errorf("hybrid: split %s has a negative source or version", s.SplitID())
	}
	return appendSplit(make([]byte, 0, 12+len(s.ID)+len(s.Data)), s), nil
}

func encodeState(st EnumState) ([]byte, error) {
	if st.Source < 0 || st.Version < 0 {
		return nil, fmt.Errorf("hybrid: enumerator state has a negative source (%d) or version (%d)", st.Source, st.Version)
	}
	b := binary.AppendUvarint(nil, uint64(st.Source))
	b = binary.AppendUvarint(b, uint64(st.Version))
	b = appendBytes(b, st.State)
	b = binary.AppendUvarint(b, uint64(len(st.Pending)))
	for _, s := range st.Pending {
		enc, err := encodeSplit(s)
		if err != nil {
			return nil, err
		}
		b = appendBytes(b, enc)
	}
	return b, nil
}

// decoder reads the version-1 encoding; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uint(what string) int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > 1<<31 {
		d.err = fmt.Errorf("%w: bad %s", ErrCorruptState, what)
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) bytes(what string) []byte {
	n := d.uint(what + " length")
	if d.err != nil {
		return nil
	}
	if n > len(d.b) {
		d.err = fmt.Errorf("%w: %s of %d bytes, %d left", ErrCorruptState, what, n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func checkVersion(version int) error {
	if version != serialVersion {
		return fmt.Errorf("%w: hybrid serializer version %d, can read %d", serde.ErrUnknownVersion, version, serialVersion)
	}
	return nil
}

func decodeSplit(version int, data []byte) (Split, error) {
	if err := checkVersion(version); err != nil {
		return Split{}, err
	}
	d := &decoder{b: data}
	s := Split{Source: d.uint("source"), Version: d.uint("version"), ID: string(d.bytes("split id"))}
	if d.err != nil {
		return Split{}, d.err
	}
	s.Data = append([]byte(nil), d.b...)
	return s, nil
}

func decodeState(version int, data []byte) (EnumState, error) {
	if err := checkVersion(version); err != nil {
		return EnumState{}, err
	}
	d := &decoder{b: data}
	st := EnumState{Source: d.uint("source"), Version: d.uint("version")}
	st.State = append([]byte(nil), d.bytes("state")...)
	n := d.uint("pending count")
	for i := 0; i < n && d.err == nil; i++ {
		enc := d.bytes("pending split")
		if d.err != nil {
			break
		}
		s, err := decodeSplit(serialVersion, enc)
		if err != nil {
			return EnumState{}, err
		}
		st.Pending = append(st.Pending, s)
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes", ErrCorruptState, len(d.b))
	}
	if d.err != nil {
		return EnumState{}, d.err
	}
	return st, nil
}
