package pipeline

import (
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

func TestParseErrorPolicies(t *testing.T) {
	src := `source:
  type: file
  options: {paths: [./in], on-malformed: dead-letter}
on-error: skip
transforms:
  - filter: amount > 100
  - map: '{"id": id}'
    on-error: dead-letter
  - select: [id]
    on-error: fail
sink:
  type: file
  options: {path: ./out}
dead-letter:
  type: file
  options: {path: ./dead}
`
	s, err := Parse("p.yaml", []byte(src), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.OnError != registry.PolicySkip || !s.SourceDeadLetters {
		t.Errorf("on-error %q, source dead letters %v", s.OnError, s.SourceDeadLetters)
	}
	want := []registry.Policy{registry.PolicySkip, registry.PolicyDeadLetter, registry.PolicyFail}
	for i, c := range s.Transforms {
		if c.OnError != want[i] {
			t.Errorf("transform %d: policy %q, want %q", i, c.OnError, want[i])
		}
	}
	if s.DeadLetter == nil || s.DeadLetter.Type != "file" || s.DeadLetter.Name != "dead-letter" || s.DeadLetter.Options.String("path") != "./dead" {
		t.Errorf("dead letter sink: %+v", s.DeadLetter)
	}

	s, err = Parse("p.yaml", []byte("source: {type: datagen}\nsink: {type: print}\n"), registry.Default(), env(nil))
	if err != nil || s.OnError != registry.PolicyFail || s.DeadLetter != nil || s.SourceDeadLetters {
		t.Errorf("defaults: %v, %+v", err, s)
	}
}

func TestErrorPolicyConfigErrors(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"dead letters without a sink", `source: {type: datagen}
transforms:
  - filter: amount > 100
    on-error: dead-letter
sink: {type: file, options: {path: ./out}}
`, "p.yaml:4: dead-letter: transform filter-1 sends dead letters, but the pipeline has no dead-letter sink"},
		{"top-level dead-letter without a sink", `source: {type: datagen}
on-error: dead-letter
transforms:
  - filter: amount > 100
sink: {type: file, options: {path: ./out}}
`, "p.yaml:2: dead-letter: transform filter-1 sends dead letters, but the pipeline has no dead-letter sink"},
		{"source dead letters without a sink", `source:
  type: file
  options: {paths: [./in], on-malformed: dead-letter}
sink: {type: file, options: {path: ./out}}
`, "p.yaml:2: dead-letter: source file sends dead letters, but the pipeline has no dead-letter sink"},
		{"a dead-letter sink nothing sends to", `source: {type: datagen}
sink: {type: file, options: {path: ./out}}
dead-letter: {type: file, options: {path: ./dead}}
`, "p.yaml:3: dead-letter: no record is sent here"},
		{"unknown policy", `source: {type: datagen}
on-error: ignore
sink: {type: print}
`, `p.yaml:2: on-error: want one of fail, skip, dead-letter, got "ignore"`},
		{"unknown policy on a transform", `source: {type: datagen}
transforms:
  - filter: amount > 100
    on-error: retry
sink: {type: print}
`, `p.yaml:4: transforms[0].on-error: want one of fail, skip, dead-letter, got "retry"`},
		{"dead-letter sink that is not exactly-once", `source: {type: datagen}
on-error: dead-letter
sink: {type: file, options: {path: ./out}}
dead-letter: {type: print}
`, `p.yaml:4: dead-letter.type: sink "print" cannot deliver exactly once`},
		{"reserved operator name", `source: {type: datagen}
on-error: skip
transforms:
  - filter: amount > 100
    name: errors-main
sink: {type: print}
`, `operator name "errors-main" is reserved`},
		{"dead-letter sink named like the sink", `source: {type: datagen}
on-error: dead-letter
sink: {type: file, name: out, options: {path: ./out}}
dead-letter: {type: file, name: out, options: {path: ./dead}}
`, `p.yaml:4: dead-letter.name: operator name "out" is used twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(c.src), registry.Default(), env(nil))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
}
