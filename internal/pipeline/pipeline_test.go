package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/registry"
)

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

const good = `name: orders
parallelism: 3
checkpoint:
  interval: 250ms
  dir: ${OUT}/ckpt
restart:
  strategy: exponential
  attempts: 7
source:
  type: datagen
  options:
    count: 1_000
    rate: ${RATE:-50.5}
transforms:
  - filter: amount > 100
  - name: shape
    map: '{"id": id}'
  - select: [id]
  - rename: {id: order}
sink:
  type: file
  options:
    path: ${OUT}/files
http:
  listen: ":9249"
  token: ${TOKEN}
  savepoint-retain: 2
  ready-checkpoint-age: 1m
`

func TestParseGood(t *testing.T) {
	s, err := Parse("p.yaml", []byte(good), registry.Default(), env(map[string]string{"OUT": "/tmp/x", "TOKEN": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "orders" || s.Parallelism != 3 || s.CheckpointInterval != 250*time.Millisecond || s.CheckpointDir != "/tmp/x/ckpt" {
		t.Errorf("job settings: got %+v", s)
	}
	if s.Restart.Strategy != "exponential" || s.Restart.Attempts != 7 || s.Restart.Delay != time.Second {
		t.Errorf("restart: got %+v", s.Restart)
	}
	if s.Delivery != registry.ExactlyOnce {
		t.Errorf("delivery: got %s, want exactly-once (file sink default)", s.Delivery)
	}
	if got := s.Source.Options.Int("count"); got != 1000 {
		t.Errorf("count: got %d, want 1000", got)
	}
	if got := s.Source.Options.Float("rate"); got != 50.5 {
		t.Errorf("rate: got %v, want 50.5 (the ${RATE:-50.5} default)", got)
	}
	if got := s.Source.Options.Int("splits"); got != 1 {
		t.Errorf("splits: got %d, want the default 1", got)
	}
	if got := s.Sink.Options.String("path"); got != "/tmp/x/files" {
		t.Errorf("path: got %q", got)
	}
	if len(s.Transforms) != 4 || s.Transforms[0].Name != "filter-1" || s.Transforms[1].Name != "shape" {
		t.Errorf("transforms: got %d, names %q %q", len(s.Transforms), s.Transforms[0].Name, s.Transforms[1].Name)
	}
	if s.HTTPListen != ":9249" || s.HTTPToken != "s3cret" {
		t.Errorf("http: got %q", s.HTTPListen)
	}
	if s.HTTPSavepointRetain != 2 || s.HTTPReadyCheckpointAge != time.Minute {
		t.Errorf("http: savepoint-retain %d, ready-checkpoint-age %s; want 2, 1m", s.HTTPSavepointRetain, s.HTTPReadyCheckpointAge)
	}
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse("dir/my-job.yaml", []byte("source: {type: datagen}\nsink: {type: print}\n"), registry.Default(), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "my-job" || s.Parallelism != 1 || s.Delivery != registry.AtLeastOnce || s.CheckpointInterval != 5*time.Second {
		t.Errorf("got name %q parallelism %d delivery %s interval %s", s.Name, s.Parallelism, s.Delivery, s.CheckpointInterval)
	}
	if s.HTTPSavepointRetain != 5 || s.HTTPReadyCheckpointAge != 0 {
		t.Errorf("http defaults: savepoint-retain %d, ready-checkpoint-age %s; want 5, 0", s.HTTPSavepointRetain, s.HTTPReadyCheckpointAge)
	}
}

// TestConfigErrors checks that each mistake gives exactly one line naming
// file:line and the field.
func TestConfigErrors(t *testing.T) {
	base := "source:\n  type: datagen\n  options:\n    count: 10\nsink:\n  type: print\n"
	tests := []struct {
		name, yaml string
		want       string // the whole one-line error
	}{
		{"unknown source connector", "source:\n  type: kafkaa\nsink:\n  type: print\n",
			`p.yaml:2: source.type: unknown source connector "kafkaa" (known: datagen, file, kafka, opensearch, postgres)`},
		{"unknown sink connector", "source:\n  type: datagen\nsink:\n  type: s3\n",
			`p.yaml:4: sink.type: unknown sink connector "s3" (known: file, iceberg, kafka, opensearch, postgres, print)`},
		{"unknown option", "source:\n  type: datagen\n  options:\n    cuont: 10\nsink:\n  type: print\n",
			`p.yaml:4: source.options.cuont: unknown field for source datagen (allowed: count, splits, rate)`},
		{"unknown top-level field", base + "paralelism: 2\n",
			`p.yaml:7: paralelism: unknown field (allowed: name, parallelism, delivery, source-task, checkpoint, restart, source, transforms, sink, dead-letter, on-error, http)`},
		{"unknown section field", base + "checkpoint:\n  intervall: 1s\n",
			`p.yaml:8: checkpoint.intervall: unknown field for checkpoint (allowed: interval, dir, retain, timeout, s3.endpoint, s3.region, s3.path-style, s3.access-key, s3.secret-key, s3.session-token, s3.lock, s3.lock-ttl)`},
		{"wrong type int", "source:\n  type: datagen\n  options:\n    count: many\nsink:\n  type: print\n",
			`p.yaml:4: source.options.count: want an integer, got "many"`},
		{"wrong type duration", base + "checkpoint:\n  interval: 5\n",
			`p.yaml:8: checkpoint.interval: want a duration such as 500ms, 10s or 1m30s, got "5"`},
		{"wrong type enum", base + "delivery: twice\n",
			`p.yaml:7: delivery: want one of exactly-once, at-least-once, got "twice"`},
		{"wrong kind", "source:\n  type: datagen\n  options:\n    count: [1, 2]\nsink:\n  type: print\n",
			`p.yaml:4: source.options.count: want a single value, got a list`},
		{"missing required option", "source:\n  type: datagen\nsink:\n  type: file\n  options:\n    prefix: x\n",
			`p.yaml:6: sink.options.path: missing required field (base directory of the part files, or s3://bucket/prefix)`},
		{"missing required option without options", "source:\n  type: datagen\nsink:\n  type: file\n",
			`p.yaml:4: sink.options.path: missing required field (base directory of the part files, or s3://bucket/prefix)`},
		{"missing sink", "source:\n  type: datagen\n",
			`p.yaml:1: sink: missing required field (the connector records go to)`},
		{"missing type", "source:\n  options: {count: 1}\nsink:\n  type: print\n",
			`p.yaml:2: source.type: missing required field (one of: datagen, file, kafka, opensearch, postgres)`},
		{"unset variable", "source:\n  type: datagen\nsink:\n  type: file\n  options:\n    path: ${NOPE}/out\n",
			`p.yaml:6: sink.options.path: environment variable NOPE is not set`},
		{"variable of wrong type", "source:\n  type: datagen\n  options:\n    count: ${SECRET}\nsink:\n  type: print\n",
			`p.yaml:4: source.options.count: want an integer (value from the environment not shown)`},
		{"exactly-once impossible", base + "delivery: exactly-once\n",
			`p.yaml:7: delivery: sink "print" cannot deliver exactly once (use at-least-once, or an exactly-once sink)`},
		{"bad expression", base + "transforms:\n  - filter: amount >\n",
			"p.yaml:8: transforms[0].filter: invalid expression: unexpected token EOF (1:8)"},
		{"two transforms in one item", base + "transforms:\n  - filter: a\n    map: b\n",
			"p.yaml:9: transforms[0].map: one transform per list item (this one already has filter)"},
		{"validate rule", "source:\n  type: datagen\n  options:\n    splits: 0\nsink:\n  type: print\n",
			"p.yaml:4: source.options.splits: must be between 1 and 65536, got 0"},
		{"yaml syntax", "source: [\n", "p.yaml:1: invalid YAML: did not find expected node content"},
		{"savepoint retention 0", base + "http:\n  listen: x\n  savepoint-retain: 0\n",
			"p.yaml:9: http.savepoint-retain: must be at least 1"},
		{"negative readiness bound", base + "http:\n  ready-checkpoint-age: -1s\n",
			"p.yaml:8: http.ready-checkpoint-age: must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(tt.yaml), registry.Default(), env(map[string]string{"SECRET": "hunter2"}))
			if err == nil {
				t.Fatal("got no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(err, ErrInvalid) = false for %v", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("the error shows a value from the environment: %s", err)
			}
		})
	}
}

func TestInterpolate(t *testing.T) {
	look := env(map[string]string{"A": "x", "EMPTY": ""})
	tests := []struct{ in, want, err string }{
		{in: "plain", want: "plain"},
		{in: "${A}/${A}", want: "x/x"},
		{in: "${B:-def}", want: "def"},
		{in: "${EMPTY:-def}", want: "def"},
		{in: "${EMPTY}", want: ""},
		{in: "$${A}", want: "${A}"},
		{in: "${B}", err: "environment variable B is not set"},
		{in: "${A", err: "unterminated ${ (want ${NAME})"},
		{in: "${1A}", err: `invalid environment variable name "1A" in ${...}`},
	}
	for _, tt := range tests {
		got, _, err := interpolate(tt.in, look)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("interpolate(%q): got error %v, want %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("interpolate(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestSeveralErrors(t *testing.T) {
	_, err := Parse("p.yaml", []byte("source:\n  type: nope\nsink:\n  type: nope\n"), registry.Default(), env(nil))
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 2 || es[1].Line != 4 {
		t.Fatalf("got %v, want two errors on lines 2 and 4", err)
	}
}
