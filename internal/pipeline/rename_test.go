package pipeline

import (
	"errors"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/internal/transform"
)

// TestRenameOverwrite: a rename item takes overwrite (default false);
// other transforms do not.
func TestRenameOverwrite(t *testing.T) {
	base := "source:\n  type: datagen\nsink:\n  type: print\ntransforms:\n"
	s, err := Parse("p.yaml", []byte(base+"  - rename: {id: user, user: id}\n  - rename: {amount: user}\n    overwrite: true\n"), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Transforms) != 2 || s.Transforms[0].Overwrite || !s.Transforms[1].Overwrite {
		t.Fatalf("got %+v, want two renames, the second with Overwrite", s.Transforms)
	}
	gotr, err := s.Transforms[0].Apply(registry.NewRecord(transform.Object{"id": 1, "user": "u"}))
	got, _ := gotr.Object()
	if err != nil || got["id"] != "u" || got["user"] != 1 {
		t.Errorf("swap: got %v, %v", got, err)
	}
	for yaml, want := range map[string]string{
		"  - filter: id > 1\n    overwrite: true\n":  "p.yaml:7: transforms[0].overwrite: only a rename takes overwrite",
		"  - rename: {a: b}\n    overwrite: maybe\n": `p.yaml:7: transforms[0].overwrite: want true or false, got "maybe"`,
	} {
		_, err := Parse("p.yaml", []byte(base+yaml), registry.Default(), env(nil))
		if !errors.Is(err, ErrInvalid) || err.Error() != want {
			t.Errorf("%q: got %v, want %s", yaml, err, want)
		}
	}
}
