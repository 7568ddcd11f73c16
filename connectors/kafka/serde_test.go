package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bigRecord holds numbers a float64 would change.
const bigRecord = `{"big":12345678901234567891,"f":1.0,"id":1,"neg":-9007199254740993,"x":0.5}`

// TestJSONDeserializerStrict: values encoding/json would rewrite silently
// are errors; numbers are exact and JSONSerializer writes them back byte
// for byte.
func TestJSONDeserializerStrict(t *testing.T) {
	d := JSONDeserializer[map[string]any]()
	v, err := d.Deserialize(&kgo.Record{Value: []byte(bigRecord)})
	if err != nil {
		t.Fatal(err)
	}
	var out kgo.Record
	if err := JSONSerializer[map[string]any]().Serialize(v, &out); err != nil || string(out.Value) != bigRecord {
		t.Errorf("re-serialized as %s (%v), want %s", out.Value, err, bigRecord)
	}
	for value, want := range map[string]error{
		"{\"s\":\"\xff\"}":            jsonrecord.ErrInvalidUTF8,
		`{"s":"\ud800"}`:              jsonrecord.ErrInvalidUTF8,
		`{"a":1,"a":2}`:               jsonrecord.ErrDuplicateKey,
		`{"a":{"b":[{"c":1,"c":1}]}}`: jsonrecord.ErrDuplicateKey,
		`null`:                        jsonrecord.ErrNotObject,
		`[1]`:                         jsonrecord.ErrNotObject,
		`1`:                           jsonrecord.ErrNotObject,
		`not json`:                    jsonrecord.ErrSyntax,
		`{"a":`:                       jsonrecord.ErrSyntax,
	} {
		if _, err := d.Deserialize(&kgo.Record{Value: []byte(value)}); !errors.Is(err, want) {
			t.Errorf("%q: got %v, want %v", value, err, want)
		}
	}
	type doc struct{ N int }
	if _, err := JSONDeserializer[doc]().Deserialize(&kgo.Record{Value: []byte(`null`)}); !errors.Is(err, jsonrecord.ErrNotObject) {
		t.Errorf("null into a struct: got %v, want ErrNotObject", err)
	}
}

// TestJSONDeserializerOnKfake runs a bounded source over a topic with one
// record of each kind encoding/json rewrites silently: by default the job
// fails naming topic, partition and offset; skipping, only the good
// records arrive, with their numbers exact.
func TestJSONDeserializerOnKfake(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	bad := []string{"{\"id\":2,\"s\":\"\xff\"}", `{"id":3,"id":3}`, `null`}
	for i, b := range bad {
		t.Run(fmt.Sprintf("bad-%d", i), func(t *testing.T) {
			topic := createTopic(t, brokers, 1)
			cl := newClient(t, brokers, kgo.DefaultProduceTopic(topic))
			for _, v := range []string{bigRecord, b, `{"id":4}`} {
				if err := cl.ProduceSync(t.Context(), kgo.StringRecord(v)).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			_, err := runJSON(t, brokers, topic)
			if !errors.Is(err, ErrMalformedRecord) || !strings.Contains(err.Error(), fmt.Sprintf("topic %q partition 0 offset 1", topic)) {
				t.Fatalf("got %v, want ErrMalformedRecord naming topic %s partition 0 offset 1", err, topic)
			}
			got, err := runJSON(t, brokers, topic, OnMalformedRecord(SkipOnError))
			if err != nil {
				t.Fatalf("skip policy: %v", err)
			}
			if len(got) != 2 {
				t.Fatalf("skip policy: got %d records %v, want 2", len(got), got)
			}
			for _, r := range got {
				b, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				if s := string(b); s != bigRecord && s != `{"id":4}` {
					t.Errorf("record written back as %s", s)
				}
			}
		})
	}
}

func runJSON(t *testing.T, brokers []string, topic string, opts ...SourceOption) ([]map[string]any, error) {
	t.Helper()
	src, err := NewSource(brokers, JSONDeserializer[map[string]any](),
		append([]SourceOption{Topics(topic), Bounded(Latest()), SourceLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[map[string]any]()
	env := stream.New(stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, src, watermark.None[map[string]any](), "kafka")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "collect")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = env.Execute(ctx, "kafka-json")
	return store.Committed(), err
}
