package pipeline

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestSourceTask: source-task decides whether the source runs in a task
// of its own; chained is the default, and auto splits exactly when a
// transform reads the records' values; none splits without transforms.
func TestSourceTask(t *testing.T) {
	const src = "source:\n  type: datagen\n  options:\n    count: 10\nsink:\n  type: print\n"
	const reads = "transforms:\n  - map: '{\"id\": id}'\n"
	const meta = "transforms:\n  - filter: meta.key != nil\n"
	cases := []struct {
		name, setting, transforms string
		want                      bool
	}{
		{"default, a transform reads values", "", reads, false},
		{"auto, only meta read", "source-task: auto\n", meta, false},
		{"auto, no transforms", "source-task: auto\n", "", false},
		{"own", "source-task: own\n", meta, true},
		{"own without transforms", "source-task: own\n", "", false},
		{"chained", "source-task: chained\n", reads, false},
		{"auto set", "source-task: auto\n", reads, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse("p.yaml", []byte(c.setting+src+c.transforms), registry.Default(), env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.OwnSourceTask(); got != c.want {
				t.Errorf("OwnSourceTask() = %v, want %v (source-task %q)", got, c.want, s.SourceTask)
			}
		})
	}
	_, err := Parse("p.yaml", []byte("source-task: apart\n"+src), registry.Default(), env(nil))
	if err == nil || !strings.Contains(err.Error(), "source-task") {
		t.Fatalf("source-task: apart: got %v, want an error naming the field", err)
	}
}
