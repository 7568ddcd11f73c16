package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"testing"
)

func encode(t testing.TB, s *Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := encoder{w: &buf}
	if err := e.snapshot(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func decode(b []byte) (*Snapshot, error) {
	d := &decoder{r: bufio.NewReader(bytes.NewReader(b)), left: int64(len(b))}
	return d.snapshot(context.Background())
}

func TestEncodingIsDeterministic(t *testing.T) {
	// Map iteration order must not leak into the file.
	s := roundTripCases()[2].snap
	first := encode(t, s)
	for range 20 {
		if got := encode(t, s); !bytes.Equal(got, first) {
			t.Fatalf("encodings differ: %d vs %d bytes", len(got), len(first))
		}
	}
	if got := encodedSize(s); got != int64(len(first)) {
		t.Errorf("encodedSize: got %d, want %d", got, len(first))
	}
}

func TestDecodeRejectsEveryTruncation(t *testing.T) {
	b := encode(t, snap(3, Checkpoint))
	for n := range len(b) {
		s, err := decode(b[:n])
		var fe *formatError
		if !errors.As(err, &fe) {
			t.Fatalf("decode of the first %d of %d bytes: got %v, %v; want a format error", n, len(b), s, err)
		}
	}
}

// FuzzDecode checks that the decoder never panics or over-allocates on
// arbitrary input, and that whatever it accepts survives a re-encode.
func FuzzDecode(f *testing.F) {
	for _, tt := range roundTripCases() {
		if b := encode(f, tt.snap); len(b) < 1<<16 {
			f.Add(b)
		}
	}
	f.Add([]byte(stateMagic + "\x00\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decode(b)
		if err != nil {
			var fe *formatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a format error", err)
			}
			return
		}
		again, err := decode(encode(t, s))
		if err != nil {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		checkSnapshot(t, again, s)
	})
}
