package serde_test

import (
	"errors"
	"testing"

	"github.com/sluice-io/sluice/serde"
)

func TestUnmarshalRejectsUnknownVersion(t *testing.T) {
	v1 := serde.JSON[int](1)
	v2 := serde.JSON[int](2)
	b, err := serde.Marshal(v2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serde.Unmarshal(v1, b); !errors.Is(err, serde.ErrUnknownVersion) {
		t.Fatalf("got %v, want ErrUnknownVersion", err)
	}
	if _, err := serde.Unmarshal(v1, []byte{1}); !errors.Is(err, serde.ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

func TestMarshalAllRoundTrip(t *testing.T) {
	s := serde.JSON[string](3)
	in := []string{"a", "", "ccc"}
	b, err := serde.MarshalAll(s, in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := serde.UnmarshalAll(s, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(in) {
		t.Fatalf("got %d items, want %d", len(out), len(in))
	}
	for i := range in {
		if out[i] != in[i] {
			t.Errorf("item %d: got %q, want %q", i, out[i], in[i])
		}
	}
}
