package pipeline

import (
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestOptionsSetInFile: the options a pipeline file sets count as set
// (Options.IsSet), a value equal to the default and one from the
// environment included; the defaults filled in for the others do not.
func TestOptionsSetInFile(t *testing.T) {
	yaml := `checkpoint:
  interval: 1s
source:
  type: datagen
  options:
    count: ${COUNT}
    splits: 1
sink:
  type: file
  options:
    path: /tmp/out
    partition-commit.time-zone: UTC
    partition-commit.policy: [success-file]
    partition-by: [id]
`
	s, err := Parse("p.yaml", []byte(yaml), registry.Default(), env(map[string]string{"COUNT": "10"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what     string
		o        registry.Options
		name     string
		has, set bool
	}{
		{"source", s.Source.Options, "count", true, true},
		{"source", s.Source.Options, "splits", true, true}, // datagen's default splits is 1: set all the same
		{"source", s.Source.Options, "rate", true, false},
		{"sink", s.Sink.Options, "path", true, true},
		{"sink", s.Sink.Options, "partition-commit.time-zone", true, true},
		{"sink", s.Sink.Options, "partition-commit.trigger", true, false},
		{"checkpoint", s.CheckpointOptions, "interval", true, true},
		{"checkpoint", s.CheckpointOptions, "retain", true, false},
	} {
		if got := c.o.Has(c.name); got != c.has {
			t.Errorf("%s %s: Has %v, want %v", c.what, c.name, got, c.has)
		}
		if got := c.o.IsSet(c.name); got != c.set {
			t.Errorf("%s %s: IsSet %v, want %v", c.what, c.name, got, c.set)
		}
	}
}
