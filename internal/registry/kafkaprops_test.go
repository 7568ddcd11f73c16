package registry

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/stream"
	"github.com/twmb/franz-go/pkg/kgo"
)

// propOptions returns Options holding the properties kv (Java names,
// without the prefix) set under properties.*.
func propOptions(kv ...string) Options {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kafkaPropsPrefix+kv[i]] = kv[i+1]
	}
	return NewOptions(nil).WithPrefixed(m)
}

// propsClient builds a franz-go client from the options the properties
// map to, as the connector's clients get them.
func propsClient(t *testing.T, side propSide, kv ...string) *kgo.Client {
	t.Helper()
	b, err := buildKafkaProps(side, propOptions(kv...))
	if err != nil {
		t.Fatalf("%v: %v", kv, err)
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, b.kgo...)...)
	if err != nil {
		t.Fatalf("%v: franz-go refuses the options: %v", kv, err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestKafkaPropsReachTheClient sets every mapped property and reads the
// franz-go option back from a client built with what it maps to.
func TestKafkaPropsReachTheClient(t *testing.T) {
	for _, tc := range []struct {
		side  propSide
		kv    []string
		opt   any // a kgo option function
		want  any
		label string
	}{
		{propConsumer, []string{"client.id", "orders-reader"}, kgo.ClientID, "orders-reader", ""},
		{propProducer, []string{"client.id", "orders-writer"}, kgo.ClientID, "orders-writer", ""},
		{propConsumer, []string{"request.timeout.ms", "5000"}, kgo.RequestTimeoutOverhead, 5 * time.Second, ""},
		{propProducer, []string{"request.timeout.ms", "5000"}, kgo.RequestTimeoutOverhead, 5 * time.Second, ""},
		{propProducer, []string{"request.timeout.ms", "5000"}, kgo.ProduceRequestTimeout, 5 * time.Second, ""},
		{propConsumer, []string{"metadata.max.age.ms", "60000"}, kgo.MetadataMaxAge, time.Minute, ""},
		{propProducer, []string{"metadata.max.age.ms", "1000"}, kgo.MetadataMaxAge, time.Second, ""},
		{propProducer, []string{"metadata.max.age.ms", "1000"}, kgo.MetadataMinAge, time.Second, "below the 5s min age"},
		{propConsumer, []string{"socket.connection.setup.timeout.ms", "3000"}, kgo.DialTimeout, 3 * time.Second, ""},
		{propProducer, []string{"connections.max.idle.ms", "540000"}, kgo.ConnIdleTimeout, 9 * time.Minute, ""},
		{propConsumer, []string{"client.rack", "eu-1a"}, kgo.Rack, "eu-1a", ""},
		{propConsumer, []string{"fetch.min.bytes", "1024"}, kgo.FetchMinBytes, int32(1024), ""},
		{propConsumer, []string{"fetch.max.bytes", "1048576"}, kgo.FetchMaxBytes, int32(1 << 20), ""},
		{propConsumer, []string{"fetch.max.bytes", "209715200"}, kgo.BrokerMaxReadBytes, int32(400 << 20), "twice a large fetch"},
		{propConsumer, []string{"fetch.max.bytes", "1048576", "max.partition.fetch.bytes", "65536"}, kgo.FetchMaxPartitionBytes, int32(65536), ""},
		{propConsumer, []string{"fetch.max.wait.ms", "250"}, kgo.FetchMaxWait, 250 * time.Millisecond, ""},
		{propProducer, []string{"batch.size", "65536"}, kgo.ProducerBatchMaxBytes, int32(65536), ""},
		{propProducer, []string{"batch.size", "209715200"}, kgo.BrokerMaxWriteBytes, int32(200 << 20), "a batch above 100 MiB"},
		{propProducer, []string{"max.request.size", "2097152"}, kgo.BrokerMaxWriteBytes, int32(2 << 20), ""},
		{propProducer, []string{"max.request.size", "500000"}, kgo.ProducerBatchMaxBytes, int32(500000), "batches capped at a small request"},
		{propProducer, []string{"max.request.size", "500000", "batch.size", "16384"}, kgo.ProducerBatchMaxBytes, int32(16384), ""},
		{propProducer, []string{"buffer.memory", "33554432"}, kgo.MaxBufferedBytes, int64(32 << 20), ""},
		{propProducer, []string{"retries", "3"}, kgo.RecordRetries, int64(3), ""},
		{propProducer, []string{"enable.idempotence", "false"}, kgo.DisableIdempotentWrite, true, ""},
		{propProducer, []string{"enable.idempotence", "true"}, kgo.DisableIdempotentWrite, false, ""},
		{propProducer, []string{"enable.idempotence", "false", "max.in.flight.requests.per.connection", "3"}, kgo.MaxProduceRequestsInflightPerBroker, 3, ""},
	} {
		name := fmt.Sprintf("%s/%v", tc.side.connector(), tc.kv)
		if tc.label != "" {
			name += "/" + tc.label
		}
		t.Run(name, func(t *testing.T) {
			cl := propsClient(t, tc.side, tc.kv...)
			if got := cl.OptValue(tc.opt); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v (%T), want %v (%T)", got, got, tc.want, tc.want)
			}
		})
	}
}

// TestKafkaPropsEveryMappingTested keeps the test above complete.
func TestKafkaPropsEveryMappingTested(t *testing.T) {
	tested := map[string]bool{"retry.backoff.ms": true, "retry.backoff.max.ms": true, // TestKafkaPropsRetryBackoff
		"max.poll.records": true, "max.buffered.records": true, // TestKafkaPropsLibraryAccepts
	}
	for _, n := range []string{"client.id", "request.timeout.ms", "metadata.max.age.ms", "socket.connection.setup.timeout.ms",
		"connections.max.idle.ms", "client.rack", "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "fetch.max.wait.ms",
		"batch.size", "max.request.size", "buffer.memory", "retries", "enable.idempotence", "max.in.flight.requests.per.connection"} {
		tested[n] = true
	}
	for _, p := range kafkaProps {
		if p.set != nil && !tested[p.name] {
			t.Errorf("%s is mapped but not tested", p.name)
		}
		if p.set != nil && (p.franz == "" || p.doc == "") {
			t.Errorf("%s: mapped without franz or doc", p.name)
		}
		if n := btoi(p.set != nil) + btoi(p.option != "") + btoi(p.why != ""); n != 1 {
			t.Errorf("%s: want exactly one of set, option, why", p.name)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestKafkaPropsRetryBackoff(t *testing.T) {
	for _, tc := range []struct {
		kv       []string
		fails    int
		min, max time.Duration
	}{
		{[]string{"retry.backoff.ms", "100"}, 1, 80 * time.Millisecond, 120 * time.Millisecond},
		{[]string{"retry.backoff.ms", "100"}, 3, 320 * time.Millisecond, 480 * time.Millisecond},
		{[]string{"retry.backoff.ms", "100"}, 30, 800 * time.Millisecond, 1200 * time.Millisecond}, // Java's max 1000
		{[]string{"retry.backoff.ms", "100", "retry.backoff.max.ms", "60000"}, 5, 1280 * time.Millisecond, 1920 * time.Millisecond},
		{[]string{"retry.backoff.ms", "2000"}, 4, 1600 * time.Millisecond, 2400 * time.Millisecond}, // above the default max: constant
		{[]string{"retry.backoff.max.ms", "300"}, 9, 240 * time.Millisecond, 360 * time.Millisecond},
		{[]string{"retry.backoff.ms", "0"}, 3, 0, 0},
	} {
		cl := propsClient(t, propConsumer, tc.kv...)
		fn, ok := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
		if !ok {
			t.Fatalf("%v: no backoff function", tc.kv)
		}
		for range 20 {
			if d := fn(tc.fails); d < tc.min || d > tc.max {
				t.Errorf("%v: backoff(%d) = %v, want between %v and %v", tc.kv, tc.fails, d, tc.min, tc.max)
				break
			}
		}
	}
}

// TestKafkaPropsLibraryAccepts passes what the properties map to through
// the connector's own constructors.
func TestKafkaPropsLibraryAccepts(t *testing.T) {
	sopts, err := kafkaSourceProperties(propOptions("max.poll.records", "100", "fetch.max.bytes", "1048576", "client.id", "x"))
	if err != nil || len(sopts) != 2 {
		t.Fatalf("source: %d options, %v; want 2 (MaxPollRecords, SourceClientOpts)", len(sopts), err)
	}
	if _, err := newKafkaTestSource(append(sopts, kafka.Topics("a"))); err != nil {
		t.Errorf("source: %v", err)
	}
	kopts, err := kafkaSinkProperties(propOptions("batch.size", "65536", "retries", "5", "max.buffered.records", "5000"), ExactlyOnce)
	if err != nil || len(kopts) != 2 {
		t.Fatalf("sink: %d options, %v; want 2 (MaxBufferedRecords, SinkClientOpts)", len(kopts), err)
	}
	if _, err := kafka.NewSink([]string{"127.0.0.1:1"}, kafka.JSONSerializer[Record](), append(kopts, kafka.DefaultTopic("t"))...); err != nil {
		t.Errorf("sink: %v", err)
	}
	if o, err := kafkaSinkProperties(NewOptions(nil), ExactlyOnce); err != nil || o != nil {
		t.Errorf("no properties: %v, %v; want nothing", o, err)
	}
}

func checkProp(side propSide, name, value string) error {
	return kafkaPropsOption(side).CheckKey(kafkaPropsPrefix+name, value)
}

func TestKafkaPropsBadValues(t *testing.T) {
	for _, tc := range []struct {
		side        propSide
		name, value string
		want        string
	}{
		{propConsumer, "fetch.max.bytes", "abc", "want an integer from 1 to 1073741824"},
		{propConsumer, "fetch.max.bytes", "0", "want an integer from 1 to 1073741824"},
		{propConsumer, "fetch.max.bytes", "1073741825", "want an integer from 1 to 1073741824"},
		{propConsumer, "fetch.max.bytes", "1.5", "want an integer"},
		{propConsumer, "fetch.min.bytes", "-1", "want an integer from 0"},
		{propConsumer, "max.partition.fetch.bytes", "2gb", "want an integer"},
		{propConsumer, "fetch.max.wait.ms", "5", "want milliseconds, an integer from 10 to 300000"},
		{propConsumer, "max.poll.records", "0", "want an integer from 1 to 1000000"},
		{propProducer, "max.buffered.records", "0", "want an integer from 1 to 1000000"},
		{propConsumer, "client.rack", "", "want 1 to 512 characters"},
		{propProducer, "client.id", strings.Repeat("x", 257), "want 1 to 256 characters"},
		{propProducer, "request.timeout.ms", "99", "from 100 to 900000"},
		{propProducer, "request.timeout.ms", "30s", "want milliseconds"},
		{propProducer, "metadata.max.age.ms", "3600001", "from 10 to 3600000"},
		{propProducer, "retry.backoff.ms", "-5", "from 0 to 600000"},
		{propProducer, "retry.backoff.max.ms", "x", "from 0 to 600000"},
		{propProducer, "socket.connection.setup.timeout.ms", "0", "from 1 to 3600000"},
		{propProducer, "connections.max.idle.ms", "900001", "from 100 to 900000"},
		{propProducer, "batch.size", "511", "from 512 to 1073741824"},
		{propProducer, "max.request.size", "1023", "from 1024 to 1073741824"},
		{propProducer, "buffer.memory", "0", "from 1 to"},
		{propProducer, "retries", "-1", "from 0 to 2147483647"},
		{propProducer, "enable.idempotence", "maybe", "want true or false"},
		{propProducer, "max.in.flight.requests.per.connection", "0", "from 1 to 1000"},
	} {
		err := checkProp(tc.side, tc.name, tc.value)
		switch {
		case err == nil:
			t.Errorf("%s %s=%q accepted", tc.side.connector(), tc.name, tc.value)
		case !strings.Contains(err.Error(), tc.want):
			t.Errorf("%s %s=%q: %v, want %q", tc.side.connector(), tc.name, tc.value, err, tc.want)
		case errors.Is(err, ErrKeyNotSupported):
			t.Errorf("%s=%q: a value error is marked as a key error", tc.name, tc.value)
		case len(tc.value) > 1 && strings.Contains(err.Error(), tc.value):
			t.Errorf("%s=%q: the error repeats the value (it may come from the environment): %v", tc.name, tc.value, err)
		}
	}
	// Good values at the ends of the ranges.
	for _, kv := range [][3]string{{"c", "fetch.max.bytes", "1073741824"}, {"c", "fetch.min.bytes", "0"}, {"c", "fetch.max.wait.ms", "10"},
		{"p", "batch.size", "512"}, {"p", "enable.idempotence", "TRUE"}, {"p", "retries", "0"}, {"p", "request.timeout.ms", "900000"}} {
		side := propConsumer
		if kv[0] == "p" {
			side = propProducer
		}
		if err := checkProp(side, kv[1], kv[2]); err != nil {
			t.Errorf("%s=%s: %v", kv[1], kv[2], err)
		}
	}
}

func TestKafkaPropsRefusedNames(t *testing.T) {
	for _, tc := range []struct {
		side propSide
		name string
		want []string
	}{
		// Unknown: the side's supported list, and franz-go.
		{propConsumer, "nonsense", []string{"unknown Kafka client property", "sluice uses franz-go, not the Java client", "consumer (kafka source) properties: client.id, client.rack,", "fetch.max.bytes"}},
		{propProducer, "receive.buffer.bytes", []string{"unknown Kafka client property", "franz-go", "producer (kafka sink) properties: batch.size, buffer.memory,"}},
		// The other side's.
		{propConsumer, "batch.size", []string{"batch.size is a producer (kafka sink) property; the kafka source does not take it"}},
		{propConsumer, "acks", []string{"acks is a producer (kafka sink) property"}},
		{propConsumer, "linger.ms", []string{"producer (kafka sink)"}},
		{propProducer, "fetch.max.bytes", []string{"fetch.max.bytes is a consumer (kafka source) property; the kafka sink does not take it"}},
		{propProducer, "client.rack", []string{"consumer (kafka source)"}},
		{propProducer, "isolation.level", []string{"consumer (kafka source)"}},
		{propProducer, "group.id", []string{"consumer (kafka source)"}},
		{propProducer, "max.poll.records", []string{"consumer (kafka source)"}},
		// A sluice option of its own.
		{propProducer, "transaction.timeout.ms", []string{"use sink.transaction-timeout"}},
		{propProducer, "transactional.id", []string{"use transactional-id-prefix"}},
		{propProducer, "partitioner.class", []string{"use sink.partitioner"}},
		{propConsumer, "bootstrap.servers", []string{"use brokers"}},
		{propProducer, "security.protocol", []string{"use tls.enabled and sasl.mechanism"}},
		{propConsumer, "sasl.jaas.config", []string{"use sasl.username and sasl.password"}},
		{propConsumer, "sasl.mechanism", []string{"use sasl.mechanism (without properties.)"}},
		{propConsumer, "sasl.login.refresh.buffer.seconds", []string{"use the sasl.* options"}},
		{propProducer, "ssl.truststore.location", []string{"use tls.ca-file (PEM)"}},
		{propProducer, "ssl.keystore.password", []string{"use the tls.* options"}},
		{propConsumer, "value.deserializer", []string{"format options"}},
		// No effect in sluice.
		{propConsumer, "session.timeout.ms", []string{"not supported", "does not join the consumer group"}},
		{propConsumer, "max.poll.interval.ms", []string{"does not join the consumer group"}},
		{propConsumer, "enable.auto.commit", []string{"there is no auto-commit"}},
		{propProducer, "delivery.timeout.ms", []string{"not supported", "record's timestamp"}},
	} {
		err := checkProp(tc.side, tc.name, "1")
		if err == nil {
			t.Errorf("%s %s accepted", tc.side.connector(), tc.name)
			continue
		}
		if !errors.Is(err, ErrKeyNotSupported) {
			t.Errorf("%s: %v is not marked ErrKeyNotSupported", tc.name, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %s: %v\nwant %q", tc.side.connector(), tc.name, err, w)
			}
		}
	}
	if err := checkProp(propConsumer, "nonsense", "1"); strings.Contains(err.Error(), "batch.size") {
		t.Errorf("the source's list has a producer property: %v", err)
	}
}

func TestKafkaPropsProducerRules(t *testing.T) {
	for _, tc := range []struct {
		kv      []string
		acks    string
		d       Delivery
		wantKey string // "" = accepted
		want    string
	}{
		{[]string{"enable.idempotence", "false"}, "", ExactlyOnce, "properties.enable.idempotence", "not allowed with exactly-once"},
		{[]string{"enable.idempotence", "false"}, "", AtLeastOnce, "", ""},
		{[]string{"enable.idempotence", "true"}, "1", AtLeastOnce, "properties.enable.idempotence", "needs properties.acks: all"},
		{[]string{"enable.idempotence", "true"}, "all", AtLeastOnce, "", ""},
		{[]string{"max.in.flight.requests.per.connection", "5"}, "", ExactlyOnce, "properties.max.in.flight.requests.per.connection", "only with the idempotent producer off"},
		{[]string{"max.in.flight.requests.per.connection", "5"}, "", AtLeastOnce, "properties.max.in.flight.requests.per.connection", "idempotent"},
		{[]string{"max.in.flight.requests.per.connection", "5", "enable.idempotence", "true"}, "", AtLeastOnce, "properties.max.in.flight.requests.per.connection", "idempotent"},
		{[]string{"max.in.flight.requests.per.connection", "5", "enable.idempotence", "false"}, "", AtLeastOnce, "", ""},
		{[]string{"max.in.flight.requests.per.connection", "2"}, "1", AtLeastOnce, "", ""},
		{[]string{"max.in.flight.requests.per.connection", "2"}, "0", AtLeastOnce, "", ""},
		{[]string{"batch.size", "2000000", "max.request.size", "1048576"}, "", ExactlyOnce, "properties.batch.size", "not be more than properties.max.request.size"},
		{[]string{"batch.size", "1048576", "max.request.size", "1048576"}, "", ExactlyOnce, "", ""},
	} {
		o := propOptions(tc.kv...)
		if tc.acks != "" {
			o = NewOptions(map[string]any{"properties.acks": tc.acks}).WithPrefixed(prefixedMap(o))
		}
		err := kafkaPropsCheckDelivery(tc.d, o)
		if tc.wantKey == "" {
			if err != nil {
				t.Errorf("%v acks=%q %s: %v", tc.kv, tc.acks, tc.d, err)
				continue
			}
			// What is accepted, franz-go accepts too (a producer with
			// the acks the sink sets).
			opts, err := kafkaSinkProperties(o, tc.d)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := kafka.NewSink([]string{"127.0.0.1:1"}, kafka.JSONSerializer[Record](), append(opts, kafka.DefaultTopic("t"))...); err != nil {
				t.Errorf("%v: %v", tc.kv, err)
			}
			b, _ := buildKafkaProps(propProducer, o)
			kopts := append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, b.kgo...)
			switch tc.acks {
			case "1":
				kopts = append(kopts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
			case "0":
				kopts = append(kopts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
			}
			if tc.d == ExactlyOnce {
				kopts = append(kopts, kgo.TransactionalID("t-0"))
			}
			cl, err := kgo.NewClient(kopts...)
			if err != nil {
				t.Errorf("%v acks=%q %s: franz-go refuses: %v", tc.kv, tc.acks, tc.d, err)
				continue
			}
			cl.Close()
			continue
		}
		oe, ok := errors.AsType[*OptionError](err)
		if !ok || oe.Option != tc.wantKey || !strings.Contains(oe.Err.Error(), tc.want) {
			t.Errorf("%v acks=%q %s: %v; want at %s: %q", tc.kv, tc.acks, tc.d, err, tc.wantKey, tc.want)
		}
		if _, err := kafkaSinkProperties(o, tc.d); err == nil {
			t.Errorf("%v acks=%q %s: the sink's build accepts it", tc.kv, tc.acks, tc.d)
		}
	}
}

func prefixedMap(o Options) map[string]string {
	m := map[string]string{}
	for _, kv := range o.Prefixed("") {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestKafkaPropsBuildErrorNamesKey: Options built by hand (no validation)
// fail the build naming the property.
func TestKafkaPropsBuildErrorNamesKey(t *testing.T) {
	_, err := kafkaSourceProperties(propOptions("fetch.max.bytes", "secret-ish"))
	oe, ok := errors.AsType[*OptionError](err)
	if !ok || oe.Option != "properties.fetch.max.bytes" || strings.Contains(err.Error(), "secret-ish") {
		t.Errorf("got %v", err)
	}
	if _, err := kafkaSinkProperties(propOptions("nonsense", "1"), AtLeastOnce); err == nil {
		t.Error("unknown property accepted by the build")
	}
}

// TestKafkaPropsDocumented: docs/cli.md's table has a row for every
// property of the mapping, naming its franz-go option.
func TestKafkaPropsDocumented(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	_, table, ok := strings.Cut(doc, "### Kafka client properties")
	if !ok {
		t.Fatal(`docs/cli.md has no "### Kafka client properties" section`)
	}
	for _, p := range kafkaProps {
		row := "| `" + p.name + "` |"
		i := strings.Index(table, row)
		if i < 0 {
			t.Errorf("docs/cli.md: no row for %s", p.name)
			continue
		}
		line, _, _ := strings.Cut(table[i:], "\n")
		if p.set != nil && !strings.Contains(line, strings.Fields(p.franz)[0]) {
			t.Errorf("docs/cli.md: the row of %s does not name %s", p.name, p.franz)
		}
		if p.option != "" && !strings.Contains(line, strings.Fields(p.option)[0]) {
			t.Errorf("docs/cli.md: the row of %s does not name %s", p.name, p.option)
		}
	}
}

func TestFamilyOptions(t *testing.T) {
	fam := Option{Name: "properties.*", Type: String, Description: "d"}
	schema := []Option{{Name: "properties.acks", Type: String}, fam, {Name: "topic", Type: String}}
	if err := checkSchema("c", schema); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Option{
		{Name: "properties.*", Type: Int},
		{Name: "properties.*", Type: String, Default: ""},
		{Name: "properties.*", Type: String, Required: true},
		{Name: "properties*", Type: String},
		{Name: "a.*.b", Type: String},
	} {
		if err := checkSchema("c", []Option{bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	for key, want := range map[string]bool{
		"properties.client.id": true, "properties.acks": false /* declared on its own */, "properties.": false,
		"properties": false, "topic": false, "other.x": false, "properties.*": false,
	} {
		if _, got := Family(schema, key); got != want {
			t.Errorf("Family(%q) = %v, want %v", key, got, want)
		}
	}
	o := NewOptions(map[string]any{"properties.acks": "1"}).
		WithPrefixed(map[string]string{"properties.retries": "3", "properties.client.id": "x", "other.y": "z"}).
		MarkFromEnvironment("properties.client.id")
	got := o.Prefixed("properties.")
	want := []KeyValue{{"properties.client.id", "x"}, {"properties.retries", "3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Prefixed = %v, want %v (sorted, without the declared properties.acks)", got, want)
	}
	if !o.FromEnvironment("properties.client.id") || o.String("properties.acks") != "1" {
		t.Error("marking from the environment lost something")
	}
}

// TestKafkaPropsWiredIntoBuild: the source's and the sink's Build map
// their properties (a bad one, in Options built by hand without
// validation, fails the build naming it; good ones build).
func TestKafkaPropsWiredIntoBuild(t *testing.T) {
	defaults := func(opts []Option, extra map[string]any) map[string]any {
		m := map[string]any{}
		for _, o := range opts {
			if o.Default != nil {
				m[o.Name] = o.Default
			}
		}
		maps.Copy(m, extra)
		return m
	}
	log := slog.New(slog.DiscardHandler)
	src, _ := Default().Source("kafka")
	sk, _ := Default().Sink("kafka")
	for _, tc := range []struct {
		prop, value string
		d           Delivery
		wantErr     string
	}{
		{"properties.fetch.max.bytes", "x", ExactlyOnce, "properties.fetch.max.bytes: want an integer"},
		{"properties.fetch.max.bytes", "1024", ExactlyOnce, ""},
		{"properties.batch.size", "x", ExactlyOnce, "properties.batch.size: want an integer"},
		{"properties.enable.idempotence", "false", ExactlyOnce, "properties.enable.idempotence: false is not allowed with exactly-once"},
		{"properties.batch.size", "16384", ExactlyOnce, ""},
	} {
		env := stream.New(stream.Logger(log))
		kv := map[string]string{tc.prop: tc.value}
		var err error
		if strings.HasPrefix(tc.prop, "properties.fetch") {
			o := NewOptions(defaults(src.Options, map[string]any{"brokers": []string{"127.0.0.1:1"}, "topics": []string{"a"}})).WithPrefixed(kv)
			_, err = src.Build(BuildContext{Env: env, Name: "k", Logger: log, Options: o, Delivery: tc.d})
		} else {
			gen, _ := Default().Source("datagen")
			in, gerr := gen.Build(BuildContext{Env: env, Name: "gen", Logger: log, Options: NewOptions(defaults(gen.Options, nil))})
			if gerr != nil {
				t.Fatal(gerr)
			}
			o := NewOptions(defaults(sk.Options, map[string]any{"brokers": []string{"127.0.0.1:1"}, "topic": "t"})).WithPrefixed(kv)
			err = sk.Build(BuildContext{Env: env, Name: "k", Logger: log, Options: o, Delivery: tc.d}, in)
		}
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s=%s: %v", tc.prop, tc.value, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s=%s: %v, want %q", tc.prop, tc.value, err, tc.wantErr)
		}
	}
}
