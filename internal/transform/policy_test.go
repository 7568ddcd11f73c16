package transform

import (
	"fmt"

	"bytes"
	"errors"
	"github.com/twmb/franz-go/pkg/kgo"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
)

// TestPolicyOnMissingField: a filter on a field the record lacks is a
// record with an error: under fail an error that is not retried, names
// the transform and shows the record; under skip a dropped record, counted
// and logged; under dead-letter a dead letter with the error, the
// operator and the input record.
func TestPolicyOnMissingField(t *testing.T) {
	in := rec(Object{"id": int64(7)})
	for _, pol := range []registry.Policy{registry.PolicyFail, registry.PolicySkip, registry.PolicyDeadLetter} {
		t.Run(string(pol), func(t *testing.T) {
			c, err := Compile(Step{Kind: Filter, Name: "big", Where: "p.yaml:4", Expr: "amount > 100", OnError: pol})
			if err != nil {
				t.Fatal(err)
			}
			reg := metrics.NewRegistry()
			var logs bytes.Buffer
			fn := c.policyStep(PolicyOptions{Metrics: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if it, err := fn(item{r: rec(Object{"amount": int64(150)}), ok: true}); err != nil || !it.ok {
				t.Fatalf("a good record: %+v, %v", it, err)
			}
			if it, err := fn(item{r: rec(Object{"amount": int64(50)}), ok: true}); err != nil || it.ok || it.dl != nil {
				t.Fatalf("a filtered record: %+v, %v", it, err)
			}
			it, err := fn(item{r: in, ok: true})
			switch pol {
			case registry.PolicyFail:
				if err == nil {
					t.Fatal("no error")
				}
				if !errors.Is(err, restart.ErrUnrecoverable) {
					t.Errorf("%v does not wrap restart.ErrUnrecoverable", err)
				}
				for _, want := range []string{`transform filter "big" (p.yaml:4)`, `record: {"id":7}`, "a field the record lacks is nil"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not contain %q", err, want)
					}
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q has several lines", err)
				}
			case registry.PolicySkip:
				if err != nil || it.ok || it.dl != nil {
					t.Fatalf("got %+v, %v; want a dropped record", it, err)
				}
				if n := reg.Sum(NumRecordsSkipped, "operator", "big"); n != 1 {
					t.Errorf("%s = %d, want 1", NumRecordsSkipped, n)
				}
				if !strings.Contains(logs.String(), "transform=big") || !strings.Contains(logs.String(), "skipped_since_last_warning=1") {
					t.Errorf("log: %s", logs.String())
				}
				for range 100 {
					_, _ = fn(item{r: in, ok: true})
				}
				if n := strings.Count(logs.String(), "skipped a record"); n != 1 {
					t.Errorf("%d warnings for 101 skipped records within 10s, want 1", n)
				}
			case registry.PolicyDeadLetter:
				if err != nil || it.ok || it.dl == nil {
					t.Fatalf("got %+v, %v; want a dead letter", it, err)
				}
				r := it.dl.Object()
				if r["operator"] != "big" || !strings.Contains(r["error"].(string), "<nil> > int") || r["record"].(Object)["id"] != int64(7) {
					t.Errorf("dead letter %v", r)
				}
				if _, ok := r["offset"]; ok {
					t.Errorf("dead letter %v has an offset, but a transform does not know one", r)
				}
				if n := reg.Sum(NumRecordsDeadLettered, "operator", "big"); n != 1 {
					t.Errorf("%s = %d, want 1", NumRecordsDeadLettered, n)
				}
				// A dead letter from an earlier step passes unchanged.
				if it2, err := fn(it); err != nil || it2.dl != it.dl {
					t.Errorf("a dead letter did not pass: %+v, %v", it2, err)
				}
			}
		})
	}
}

func TestDeadLetterRecord(t *testing.T) {
	d := &registry.DeadLetter{Error: "bad", Operator: "src", Split: "a@0", File: "a", Offset: 12, Raw: []byte("{\"x\": \xff")}
	r := d.Object()
	if r["raw_base64"] != "eyJ4Ijog/w==" || r["offset"] != int64(12) || r["split"] != "a@0" {
		t.Errorf("got %v", r)
	}
	if _, ok := r["raw"]; ok {
		t.Errorf("invalid UTF-8 as raw: %v", r)
	}
	m := registry.MarkDeadLetter(d)
	if got, ok := registry.DeadLetterOf(m); !ok || got != d {
		t.Errorf("DeadLetterOf(MarkDeadLetter(d)) = %v, %v", got, ok)
	}
	if _, ok := registry.DeadLetterOf(rec(Object{"\x00sluice.dead-letter": "forged"})); ok {
		t.Error("a decoded record passes for a dead letter")
	}
}

// TestLazyDeadLetterHasRecord: with the lazy path the source leaves
// values undecoded; a step that fails under dead-letter with an error that
// names no input (a sink's step) still gives the dead letter the whole
// input record, decoded from the record's bytes.
func TestLazyDeadLetterHasRecord(t *testing.T) {
	for _, js := range lazyCodecs(t) {
		// A sink's step that fails (as an index expression that returns
		// a number does) with a plain error, which carries no input.
		c := FuncStep(Step{Name: "out-step", Where: "p.yaml:9", OnError: registry.PolicyDeadLetter},
			func(r Record) (Record, error) {
				return r, errors.New("option index-expr: returned a int, want a string")
			}, true)
		kr := &kgo.Record{Topic: "in", Value: []byte(`{"id": 7, "n": 1}`)}
		r := registry.KafkaRecord(kr, &registry.Codecs{Value: js})
		if r.Decoded() {
			t.Fatal("the input record is decoded: the test needs an undecoded one")
		}
		out, err := c.policyStep(PolicyOptions{})(item{r: r, ok: true})
		if err != nil || out.dl == nil {
			t.Fatalf("got %+v, %v; want a dead letter", out, err)
		}
		in, _ := out.dl.Object()["record"].(map[string]any)
		if fmt.Sprint(in["id"]) != "7" || fmt.Sprint(in["n"]) != "1" {
			t.Fatalf("dead letter %v: want the input record {id: 7, n: 1}", out.dl.Object())
		}
	}
}
