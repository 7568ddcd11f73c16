package fakes

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies: the fakes depend only on the standard library and
// sluice's public API packages (and the stdlib-only internal packages
// those use).
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	allowed := map[string]bool{"metrics": true, "serde": true, "sink": true, "source": true, "watermark": true,
		"internal/sinkrt": true, "connectortest/fakes": true}
	for p := range strings.FieldsSeq(string(out)) {
		if !allowed[strings.TrimPrefix(p, "github.com/sluice-io/sluice/")] {
			t.Errorf("fakes depends on %s", p)
		}
	}
}
