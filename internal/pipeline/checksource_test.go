package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestSinkChecksSource: a sink's CheckSource error refuses the pipeline at
// the sink's line; its warning lands in Spec.Warnings.
func TestSinkChecksSource(t *testing.T) {
	t.Chdir(t.TempDir())
	const loop = "source:\n  type: file\n  options:\n    paths: [data]\n    discovery: %s\nsink:\n  type: file\n  options:\n    path: data/out\n"
	_, err := Parse("p.yaml", []byte(strings.Replace(loop, "%s", "1s", 1)), registry.Default(), env(nil))
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), `p.yaml:7: sink: the file sink's path "data/out"`) || !strings.Contains(err.Error(), `source's path "data"`) {
		t.Fatalf("got %v, want an error at the sink naming both paths", err)
	}
	spec, err := Parse("p.yaml", []byte(strings.Replace(loop, "%s", "0s", 1)), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(spec.Warnings) != 1 || !strings.HasPrefix(spec.Warnings[0], `p.yaml:7: sink: the file sink's path "data/out"`) {
		t.Fatalf("warnings %q, want one at the sink", spec.Warnings)
	}
	// Paths from the environment are not shown.
	withEnv := strings.Replace(strings.Replace(loop, "%s", "1s", 1), "path: data/out", "path: ${OUT}", 1)
	_, err = Parse("p.yaml", []byte(withEnv), registry.Default(), env(map[string]string{"OUT": "data/secret-out"}))
	if err == nil || strings.Contains(err.Error(), "secret-out") || !strings.Contains(err.Error(), "sink.options.path (value from the environment not shown)") {
		t.Fatalf("got %v, want the sink path named by its field, not its value", err)
	}
}
