package registry

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/internal/format"
)

func TestParseSpecificOffsets(t *testing.T) {
	for in, want := range map[string]map[string]map[int32]int64{
		"partition:0,offset:42;partition:1,offset:300": {"": {0: 42, 1: 300}},
		" partition : 0 , offset : 42 ; ":              {"": {0: 42}},
		"topic:a,partition:0,offset:1;partition:0,offset:7;topic:b,partition:2,offset:0": {
			"a": {0: 1}, "": {0: 7}, "b": {2: 0}},
		"offset:5,partition:3": {"": {3: 5}},
	} {
		got, err := ParseSpecificOffsets(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if !maps.EqualFunc(got, want, maps.Equal) {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
	for in, msg := range map[string]string{
		"":                       "empty",
		"partition:0":            "want partition:<p>,offset:<o>",
		"partition:0,offset:x":   "entry 1: the offset is not a number from 0",
		"partition:-1,offset:0":  "entry 1: the partition is not a number",
		"partition:0,offset:-3":  "entry 1: the offset is not",
		"partition:0,offset:1;;": "entry 2 is empty",
		"partition:0,offset:1;partition:0,offset:2":                 "entry 2: the partition of every topic is given twice",
		"topic:a,partition:0,offset:1;topic:a,partition:0,offset:2": "entry 2: the partition of its topic is given twice",
		"part:0,offset:1":                  "entry 1: item 1 has an unknown key",
		"partition0,offset:1":              "entry 1: item 1 is not key:value",
		"partition:0,partition:1,offset:1": "partition given twice",
		"partition:99999999999,offset:1":   "not a number",
	} {
		_, err := ParseSpecificOffsets(in)
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: got %v, want an error with %q", in, err, msg)
		}
	}
}

// TestValidateKafkaSource checks each rule across the source's options:
// the error is an *OptionError naming the key it is reported at.
func TestValidateKafkaSource(t *testing.T) {
	base := func(kv ...any) Options {
		m := map[string]any{"brokers": []string{"b:9092"}, "properties.auto.offset.reset": "earliest",
			"scan.topic-partition-discovery.interval": 30 * time.Second, "properties.isolation.level": "read_committed"}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return NewOptions(m)
	}
	topics := []string{"a", "b"}
	for _, c := range []struct {
		name string
		o    Options
		key  string // "" = valid
		msg  string
	}{
		{"topics", base("topics", topics), "", ""},
		{"pattern", base("topic-pattern", "in-.*"), "", ""},
		{"both", base("topics", topics, "topic-pattern", "x"), "topic-pattern", "either topics or topic-pattern"},
		{"neither", base(), "topics", "set topics (a list) or topic-pattern"},
		{"empty topics", base("topics", []string{}), "topics", "empty list"},
		{"start alias", base("topics", topics, "start", "latest"), "", ""},
		{"start and mode", base("topics", topics, "start", "latest", "scan.startup.mode", "latest-offset"), "start", "deprecated alias of scan.startup.mode"},
		{"bounded and mode", base("topics", topics, "bounded", true, "scan.bounded.mode", "latest-offset"), "bounded", "deprecated alias of scan.bounded.mode"},
		{"group and group.id", base("topics", topics, "group", "g", "properties.group.id", "g"), "group", "deprecated alias of properties.group.id"},
		{"timestamp without millis", base("topics", topics, "scan.startup.mode", "timestamp"), "scan.startup.mode", "needs scan.startup.timestamp-millis"},
		{"millis without timestamp", base("topics", topics, "scan.startup.timestamp-millis", int64(5)), "scan.startup.timestamp-millis", "only with scan.startup.mode: timestamp (the mode is earliest-offset)"},
		{"millis with alias start", base("topics", topics, "start", "latest", "scan.startup.timestamp-millis", int64(5)), "scan.startup.timestamp-millis", "the mode is latest-offset"},
		{"timestamp", base("topics", topics, "scan.startup.mode", "timestamp", "scan.startup.timestamp-millis", int64(5)), "", ""},
		{"specific without offsets", base("topics", topics, "scan.startup.mode", "specific-offsets"), "scan.startup.mode", "needs scan.startup.specific-offsets"},
		{"offsets without specific", base("topics", topics, "scan.startup.specific-offsets", "partition:0,offset:1"), "scan.startup.specific-offsets", "only with scan.startup.mode: specific-offsets"},
		{"specific", base("topics", topics, "scan.startup.mode", "specific-offsets", "scan.startup.specific-offsets", "topic:a,partition:0,offset:1;partition:1,offset:2"), "", ""},
		{"specific unknown topic", base("topics", topics, "scan.startup.mode", "specific-offsets", "scan.startup.specific-offsets", "topic:c,partition:0,offset:1"), "scan.startup.specific-offsets", `topic "c" is not among topics`},
		{"specific with pattern", base("topic-pattern", "x.*", "scan.startup.mode", "specific-offsets", "scan.startup.specific-offsets", "topic:c,partition:0,offset:1"), "", ""},
		{"group-offsets without group", base("topics", topics, "scan.startup.mode", "group-offsets"), "scan.startup.mode", "needs properties.group.id"},
		{"group-offsets with alias group", base("topics", topics, "scan.startup.mode", "group-offsets", "group", "g"), "", ""},
		{"group-offsets", base("topics", topics, "scan.startup.mode", "group-offsets", "properties.group.id", "g"), "", ""},
		{"bounded timestamp without millis", base("topics", topics, "scan.bounded.mode", "timestamp"), "scan.bounded.mode", "needs scan.bounded.timestamp-millis"},
		{"bounded millis without timestamp", base("topics", topics, "bounded", true, "scan.bounded.timestamp-millis", int64(1)), "scan.bounded.timestamp-millis", "(the mode is latest-offset)"},
		{"bounded specific without offsets", base("topics", topics, "scan.bounded.mode", "specific-offsets"), "scan.bounded.mode", "needs scan.bounded.specific-offsets"},
		{"bounded offsets without specific", base("topics", topics, "scan.bounded.specific-offsets", "partition:0,offset:1"), "scan.bounded.specific-offsets", "(the mode is unbounded)"},
		{"bounded specific", base("topics", topics, "scan.bounded.mode", "specific-offsets", "scan.bounded.specific-offsets", "partition:0,offset:1"), "", ""},
	} {
		err := validateKafkaSource(c.o)
		if c.key == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if _, err := kafkaSourceStart(c.o); err != nil {
				t.Errorf("%s: build: %v", c.name, err)
			}
			continue
		}
		oe, ok := errors.AsType[*OptionError](err)
		if !ok {
			t.Errorf("%s: got %v, want an *OptionError at %s", c.name, err, c.key)
			continue
		}
		if oe.Option != c.key || !strings.Contains(oe.Err.Error(), c.msg) {
			t.Errorf("%s: got %s: %v; want %s: …%s…", c.name, oe.Option, oe.Err, c.key, c.msg)
		}
	}
}

// TestKafkaSourceStartModes checks that every valid combination of the
// options turns into library options the library accepts.
func TestKafkaSourceStartModes(t *testing.T) {
	src, _ := Default().Source("kafka")
	for _, kv := range [][]any{
		{"scan.startup.mode", "latest-offset"},
		{"scan.startup.mode", "group-offsets", "properties.group.id", "g", "properties.auto.offset.reset", "none"},
		{"scan.startup.mode", "group-offsets", "group", "g", "properties.auto.offset.reset", "latest"},
		{"scan.startup.mode", "timestamp", "scan.startup.timestamp-millis", int64(1)},
		{"scan.startup.mode", "specific-offsets", "scan.startup.specific-offsets", "partition:0,offset:1", "properties.auto.offset.reset", "none"},
		{"scan.bounded.mode", "latest-offset"},
		{"scan.bounded.mode", "timestamp", "scan.bounded.timestamp-millis", int64(1)},
		{"scan.bounded.mode", "specific-offsets", "scan.bounded.specific-offsets", "partition:0,offset:1"},
		{"start", "latest", "bounded", true},
		{"properties.isolation.level", "read_uncommitted", "scan.topic-partition-discovery.interval", time.Duration(0)},
	} {
		m := map[string]any{"brokers": []string{"127.0.0.1:1"}, "topics": []string{"a"}, "on-malformed": "fail",
			"connect-timeout": time.Second}
		for _, o := range src.Options {
			if o.Default != nil {
				m[o.Name] = o.Default
			}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		o := NewOptions(m)
		if err := validateKafkaSource(o); err != nil {
			t.Errorf("%v: %v", kv, err)
			continue
		}
		opts, err := kafkaSourceStart(o)
		if err != nil {
			t.Errorf("%v: %v", kv, err)
			continue
		}
		if _, err := newKafkaTestSource(opts); err != nil {
			t.Errorf("%v: the library refuses: %v", kv, err)
		}
	}
}

func newKafkaTestSource(opts []kafka.SourceOption) (*kafka.Source[Record], error) {
	return kafka.NewSource([]string{"127.0.0.1:1"}, kafkaRecords(&Codecs{Value: jsonCodec(nil)}, "json", true), opts...)
}

func jsonCodec(t *testing.T) format.Codec {
	c, err := format.Builtin().New("json", format.Config{})
	if err != nil && t != nil {
		t.Fatal(err)
	}
	return c
}
