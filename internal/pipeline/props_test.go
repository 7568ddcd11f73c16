package pipeline

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

const propsPipeline = `source:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
    topics: [in]
    properties.group.id: g
    properties.fetch.max.bytes: 1048576
    properties.client.id: ${CLIENT_ID}
    properties.max.poll.records: "100"
sink:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
    topic: out
    properties.acks: all
    properties.batch.size: 65536
    properties.retries: 5
`

// TestPropertiesParsed: keys under properties.* reach the connector's
// Options (Prefixed), declared ones keep their type, values from the
// environment are marked so.
func TestPropertiesParsed(t *testing.T) {
	s, err := Parse("p.yaml", []byte(propsPipeline), registry.Default(), env(map[string]string{"CLIENT_ID": "reader-1"}))
	if err != nil {
		t.Fatal(err)
	}
	got := s.Source.Options.Prefixed("properties.")
	want := []registry.KeyValue{{Key: "properties.client.id", Value: "reader-1"}, {Key: "properties.fetch.max.bytes", Value: "1048576"},
		{Key: "properties.max.poll.records", Value: "100"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("source properties: %v, want %v", got, want)
	}
	if s.Source.Options.String("properties.group.id") != "g" || s.Source.Options.String("properties.isolation.level") != "read_committed" {
		t.Error("declared properties.* options lost their value or default")
	}
	if !s.Source.Options.FromEnvironment("properties.client.id") || s.Source.Options.FromEnvironment("properties.fetch.max.bytes") {
		t.Error("FromEnvironment is wrong for the properties")
	}
	if got := s.Sink.Options.Prefixed("properties."); len(got) != 2 || got[0].Key != "properties.batch.size" || got[1].Key != "properties.retries" {
		t.Errorf("sink properties: %v (properties.acks is declared, not a passthrough)", got)
	}
	if s.Sink.Options.String("properties.compression.type") != "lz4" {
		t.Error("the sink's declared compression lost its default")
	}
}

// TestPropertiesErrorsAtTheirLine: each bad property is reported at its
// own line, naming it; values from the environment are not shown.
func TestPropertiesErrorsAtTheirLine(t *testing.T) {
	const src = `source:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
    topics: [in]
    properties.fetch.max.bytes: lots
    properties.nonsense: 1
    properties.batch.size: 65536
    properties.client.id: ${EMPTY}
    properties.session.timeout.ms: 45000
sink:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
    topic: out
    properties.transaction.timeout.ms: 60000
    properties.ssl.truststore.location: /etc/ts.jks
    properties.fetch.min.bytes: 1
    properties.max.request.size: ${SIZE}
`
	_, err := Parse("p.yaml", []byte(src), registry.Default(), env(map[string]string{"EMPTY": "", "SIZE": "12-secret-34"}))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("got %v, want Errors", err)
	}
	want := []struct {
		line        int
		field, text string
	}{
		{6, "source.options.properties.fetch.max.bytes", "want an integer from 1 to 1073741824, got lots"},
		{7, "source.options.properties.nonsense", "unknown Kafka client property: sluice uses franz-go, not the Java client, and maps these consumer (kafka source) properties: client.id,"},
		{8, "source.options.properties.batch.size", "batch.size is a producer (kafka sink) property; the kafka source does not take it"},
		{9, "source.options.properties.client.id", "want 1 to 256 characters (value from the environment not shown)"},
		{10, "source.options.properties.session.timeout.ms", "does not join the consumer group"},
		{16, "sink.options.properties.transaction.timeout.ms", "use sink.transaction-timeout"},
		{17, "sink.options.properties.ssl.truststore.location", "use tls.ca-file (PEM)"},
		{18, "sink.options.properties.fetch.min.bytes", "consumer (kafka source) property; the kafka sink does not take it"},
		{19, "sink.options.properties.max.request.size", "want an integer from 1024 to 1073741824 (value from the environment not shown)"},
	}
	if len(es) != len(want) {
		t.Errorf("got %d errors, want %d:\n%v", len(es), len(want), err)
	}
	for i, w := range want {
		if i >= len(es) {
			break
		}
		e := es[i]
		if e.Line != w.line || e.Field != w.field || !strings.Contains(e.Msg, w.text) {
			t.Errorf("error %d: %v\nwant p.yaml:%d: %s: …%s…", i, e, w.line, w.field, w.text)
		}
	}
	if strings.Contains(err.Error(), "12-secret-34") {
		t.Errorf("a value from the environment is shown: %v", err)
	}
	if strings.Contains(es[1].Msg, "got 1") {
		t.Errorf("an error about the key repeats the value: %v", es[1])
	}
}

// TestPropertiesCheckedAgainstDelivery: rules across the sink's
// properties, acks and the pipeline's delivery are reported at the
// property's line.
func TestPropertiesCheckedAgainstDelivery(t *testing.T) {
	for _, tc := range []struct {
		delivery, props string
		line            int
		field, text     string
	}{
		{"exactly-once", "    properties.enable.idempotence: false\n", 8, "sink.options.properties.enable.idempotence", "not allowed with exactly-once"},
		{"at-least-once", "    properties.acks: 1\n    properties.enable.idempotence: true\n", 9, "sink.options.properties.enable.idempotence", "needs properties.acks: all"},
		{"at-least-once", "    properties.max.in.flight.requests.per.connection: 2\n", 8, "sink.options.properties.max.in.flight.requests.per.connection", "idempotent producer off"},
		{"exactly-once", "    properties.max.request.size: 100000\n    properties.batch.size: 200000\n", 9, "sink.options.properties.batch.size", "not be more than properties.max.request.size"},
		{"at-least-once", "    properties.enable.idempotence: false\n    properties.max.in.flight.requests.per.connection: 2\n", 0, "", ""},
	} {
		src := "delivery: " + tc.delivery + `
source:
  type: datagen
sink:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
` + tc.props + "    topic: out\n"
		_, err := Parse("p.yaml", []byte(src), registry.Default(), env(nil))
		if tc.line == 0 {
			if err != nil {
				t.Errorf("%s %q: %v", tc.delivery, tc.props, err)
			}
			continue
		}
		var es Errors
		if !errors.As(err, &es) || len(es) != 1 {
			t.Errorf("%s %q: got %v, want one error", tc.delivery, tc.props, err)
			continue
		}
		if e := es[0]; e.Line != tc.line || e.Field != tc.field || !strings.Contains(e.Msg, tc.text) {
			t.Errorf("%s %q: %v\nwant p.yaml:%d: %s: …%s…", tc.delivery, tc.props, e, tc.line, tc.field, tc.text)
		}
	}
}

// TestPropertiesOnlyWhereDeclared: a connector without a family refuses
// properties.* keys as unknown fields, listing its options.
func TestPropertiesOnlyWhereDeclared(t *testing.T) {
	const src = `source:
  type: datagen
  options:
    properties.client.id: x
sink:
  type: print
`
	_, err := Parse("p.yaml", []byte(src), registry.Default(), env(nil))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4: source.options.properties.client.id: unknown field for source datagen") {
		t.Errorf("got %v", err)
	}
}

// TestPropertiesFamilyNameIsNoKey: the family's own name written as a key
// is an unknown field, not silently dropped.
func TestPropertiesFamilyNameIsNoKey(t *testing.T) {
	const src = `source:
  type: kafka
  options:
    brokers: 127.0.0.1:9092
    topics: [in]
    properties.*: x
sink:
  type: print
`
	_, err := Parse("p.yaml", []byte(src), registry.Default(), env(nil))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:6: source.options.properties.*: unknown field for source kafka") {
		t.Errorf("got %v", err)
	}
}
