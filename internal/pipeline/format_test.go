package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestFormatAndMetaErrors: an unknown format lists the known ones, a
// meta field that does not exist and a sink expression that does not
// compile are reported at their lines.
func TestFormatAndMetaErrors(t *testing.T) {
	yaml := `source:
  type: kafka
  options:
    brokers: [127.0.0.1:9092]
    topics: [in]
    format: nope
transforms:
  - filter: meta.kee == "x"
sink:
  type: kafka
  options:
    brokers: [127.0.0.1:9092]
    topic: out
    key: "id +"
    partition: meta.offzet
`
	_, err := Parse("p.yaml", []byte(yaml), registry.Default(), env(nil))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want Errors", err)
	}
	for _, want := range []string{
		`p.yaml:6: source.options.format: want one of `,
		`p.yaml:8: transforms[0].filter: meta has no field "kee"`,
		`p.yaml:14: sink.options.key: invalid expression`,
	} {
		if !strings.Contains(es.Error(), want) {
			t.Errorf("errors lack %q:\n%s", want, es.Error())
		}
	}
	yaml = strings.Replace(yaml, "format: nope", "format: raw", 1)
	yaml = strings.Replace(yaml, `meta.kee == "x"`, `meta.key == "x"`, 1)
	yaml = strings.Replace(yaml, `key: "id +"`, `key: meta.key`, 1)
	_, err = Parse("p.yaml", []byte(yaml), registry.Default(), env(nil))
	if err == nil || !strings.Contains(err.Error(), `p.yaml:15: sink.options.partition: meta has no field "offzet"`) {
		t.Errorf("got %v, want the partition expression's error at line 15", err)
	}
}
