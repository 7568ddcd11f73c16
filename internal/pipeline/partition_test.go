package pipeline

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/internal/transform"
)

const partitionPipeline = `parallelism: 3
source:
  type: datagen
transforms:
%s
sink:
  type: file
  options:
    path: /tmp/out
`

func TestParsePartitionSteps(t *testing.T) {
	steps := "  - key_by: record.user\n    on-error: skip\n  - map: '{\"id\": id}'\n  - rebalance: true"
	s, err := Parse("p.yaml", []byte(strings.Replace(partitionPipeline, "%s", steps, 1)), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Transforms) != 3 || s.Transforms[0].Kind != transform.KeyBy || s.Transforms[0].Expr != "record.user" ||
		s.Transforms[0].OnError != registry.PolicySkip || s.Transforms[2].Kind != transform.Rebalance {
		t.Fatalf("transforms: got %+v", s.Transforms)
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings at parallelism 3: %v", s.Warnings)
	}
	one := strings.Replace(strings.Replace(partitionPipeline, "%s", "  - key_by: id", 1), "parallelism: 3", "parallelism: 1", 1)
	s, err = Parse("p.yaml", []byte(one), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "p.yaml:5: key_by with parallelism 1") {
		t.Errorf("warnings at parallelism 1: got %q, want one naming p.yaml:5", s.Warnings)
	}
}

func TestParsePartitionErrors(t *testing.T) {
	for _, tc := range []struct{ steps, want string }{
		{"  - rebalance: false", "p.yaml:5: transforms[0].rebalance: want true"},
		{"  - rebalance: maybe", "p.yaml:5: transforms[0].rebalance:"},
		{"  - rebalance: true\n    on-error: skip", "p.yaml:6: transforms[0].on-error: a rebalance never fails"},
		{"  - key_by: ''", "p.yaml:5: transforms[0].key_by: empty expression"},
		{"  - key_by: 'id +'", "p.yaml:5: transforms[0].key_by: invalid expression"},
		{"  - key_by: nope", `p.yaml:5: transforms[0].key_by: no field "nope" in the records from source datagen`},
		{"  - key_by: id\n  - name: key_by-1-in\n    map: '{\"id\": id}'", `p.yaml:7: transforms[1].name: operator name "key_by-1-in" is used twice`},
		{"  - key_by: id\n    rebalance: true", "p.yaml:6: transforms[0].rebalance: one transform per list item"},
	} {
		_, err := Parse("p.yaml", []byte(strings.Replace(partitionPipeline, "%s", tc.steps, 1)), registry.Default(), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want an error containing %q", tc.steps, err, tc.want)
		}
	}
}
