package kafka

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/restart"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOffsetsNoResetAndEveryTopic resolves start offsets of two topics of
// two partitions with 5 records each: Committed(NoReset()) fails naming
// every partition without a committed offset (and the group), and takes
// the committed ones when all have one; AtOffsets with the topic "" gives
// offsets to every topic not named, a named topic's missing partition
// uses the fallback, and NoReset as fallback fails naming it.
func TestOffsetsNoResetAndEveryTopic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ta, tb := createTopic(t, b.brokers, 2), createTopic(t, b.brokers, 2)
		cl := newClient(t, b.brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		var recs []*kgo.Record
		for _, topic := range []string{ta, tb} {
			for p := range int32(2) {
				for range 5 {
					recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("{}")})
				}
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		adm := kadm.NewClient(cl)
		group := uniqueName("g")
		cfg := defaultSourceConfig()
		cfg.brokers, cfg.group = b.brokers, group
		e := &enumerator{cfg: &cfg}
		tps := []topicPartition{{tb, 1}, {ta, 0}, {ta, 1}, {tb, 0}}

		// One committed offset of four.
		os := kadm.Offsets{}
		os.AddOffset(ta, 1, 3, -1)
		if resp, err := adm.CommitOffsets(ctx, group, os); err != nil || resp.Error() != nil {
			t.Fatalf("commit: %v %v", err, resp.Error())
		}
		_, err := e.offsets(ctx, adm, cl, tps, Committed(NoReset()))
		if !errors.Is(err, ErrNoStartOffset) || !errors.Is(err, restart.ErrUnrecoverable) {
			t.Fatalf("Committed(NoReset()) with partitions without offsets: got %v, want ErrNoStartOffset and restart.ErrUnrecoverable", err)
		}
		for _, want := range []string{`group "` + group + `"`, `topic "` + ta + `" partition 0, topic "` + tb + `" partition 0, topic "` + tb + `" partition 1`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
		}
		if strings.Contains(err.Error(), `"`+ta+`" partition 1`) {
			t.Errorf("error %q names a partition that has an offset", err)
		}
		got, err := e.offsets(ctx, adm, cl, tps, Committed(Earliest()))
		if err != nil || got[topicPartition{ta, 1}] != 3 || got[topicPartition{ta, 0}] != 0 || got[topicPartition{tb, 1}] != 0 {
			t.Fatalf("Committed(Earliest()): %v, %v", got, err)
		}

		// Every topic (""), and ta's own entry without partition 1.
		spec := AtOffsets(map[string]map[int32]int64{"": {0: 1, 1: 2}, ta: {0: 4}}, Latest())
		got, err = e.offsets(ctx, adm, cl, tps, spec)
		want := map[topicPartition]int64{{ta, 0}: 4, {ta, 1}: 5, {tb, 0}: 1, {tb, 1}: 2}
		if err != nil || len(got) != len(want) {
			t.Fatalf("AtOffsets: %v, %v; want %v", got, err, want)
		}
		for tp, o := range want {
			if got[tp] != o {
				t.Errorf("AtOffsets: %v at %d, want %d", tp, got[tp], o)
			}
		}
		_, err = e.offsets(ctx, adm, cl, tps, AtOffsets(map[string]map[int32]int64{"": {0: 1, 1: 2}, ta: {0: 4}}, NoReset()))
		if !errors.Is(err, ErrNoStartOffset) || !strings.Contains(err.Error(), `topic "`+ta+`" partition 1`) {
			t.Fatalf("AtOffsets(…, NoReset()) with a missing partition: got %v", err)
		}
	})
}

// TestNoResetValidation: NoReset is a reset only.
func TestNoResetValidation(t *testing.T) {
	for name, opts := range map[string][]SourceOption{
		"start":      {Topics("a"), StartingOffsets(NoReset())},
		"stop":       {Topics("a"), Bounded(NoReset())},
		"bad reset":  {Topics("a"), GroupID("g"), StartingOffsets(Committed(AtTimestamp(1)))},
		"no groupID": {Topics("a"), StartingOffsets(Committed(NoReset()))},
	} {
		if _, err := NewSource([]string{"127.0.0.1:1"}, BytesDeserializer(), opts...); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := NewSource([]string{"127.0.0.1:1"}, BytesDeserializer(), Topics("a"), GroupID("g"), StartingOffsets(Committed(NoReset()))); err != nil {
		t.Errorf("Committed(NoReset()): %v", err)
	}
}
