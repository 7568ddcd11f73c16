package pipeline

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

func TestUIDs(t *testing.T) {
	const p = "source:\n  type: datagen\n  name: orders-v2\n  uid: orders\nsink:\n  type: print\n  uid: out\n"
	s, err := Parse("p.yaml", []byte(p), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Source.Name != "orders-v2" || s.Source.UID != "orders" || s.Sink.Name != "print" || s.Sink.UID != "out" {
		t.Errorf("got source %q uid %q, sink %q uid %q", s.Source.Name, s.Source.UID, s.Sink.Name, s.Sink.UID)
	}
	s, err = Parse("p.yaml", []byte("source: {type: datagen}\nsink: {type: print}\n"), registry.Default(), env(nil))
	if err != nil || s.Source.UID != "" || s.Sink.UID != "" {
		t.Errorf("without uid lines: %+v, %v; want empty uids (the names apply)", s, err)
	}
	for _, c := range []struct{ yaml, want string }{
		{"source: {type: datagen, uid: ''}\nsink: {type: print}\n", "p.yaml:1: source.uid: must not be empty"},
		{"source: {type: datagen, uid: x}\nsink: {type: print, uid: x}\n", `p.yaml:2: sink.uid: the source has the same uid "x"`},
	} {
		_, err := Parse("p.yaml", []byte(c.yaml), registry.Default(), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want %q", c.yaml, err, c.want)
		}
	}
}
