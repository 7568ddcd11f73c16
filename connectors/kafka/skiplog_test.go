package kafka

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// logBuffer is a bytes.Buffer safe for a slog handler written from many
// goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSkipLogsRateLimited: under SkipOnError every skipped record is
// counted in numRecordsInErrors (the file source's metric), and logged
// with topic, partition and offset, but not once per record: the first
// at once, then at most once per interval (an hour here, so exactly one
// warning).
func TestSkipLogsRateLimited(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	topic := createTopic(t, brokers, 1)
	cl := newClient(t, brokers, kgo.DefaultProduceTopic(topic))
	const total, every = 400, 8 // records 3, 11, 19, … are malformed
	var recs []*kgo.Record
	for i := range total {
		v := fmt.Sprintf(`{"n":%d}`, i)
		if i%every == 3 {
			v = "not json " + v
		}
		recs = append(recs, kgo.StringRecord(v))
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	type doc struct{ N int }
	src, err := NewSource(brokers, JSONDeserializer[doc](), Topics(topic), Bounded(Latest()),
		OnMalformedRecord(SkipOnError), SourceLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	src.cfg.malformedLogEvery = time.Hour
	store := testsink.NewStore[doc]()
	env := stream.New(stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[doc](), "kafka"), testsink.NewTwoPhase(store), "collect")
	res, err := env.Execute(t.Context(), "skip-log")
	if err != nil {
		t.Fatal(err)
	}
	bad := int64(total / every)
	if n := res.Counter(metrics.NumRecordsInErrors); n != bad {
		t.Errorf("numRecordsInErrors = %d, want %d", n, bad)
	}
	if got := int64(len(store.Committed())); got != total-bad {
		t.Errorf("%d records, want %d", got, total-bad)
	}
	out := logs.String()
	if n := strings.Count(out, "skipped a malformed record"); n != 1 {
		t.Errorf("%d warnings for %d skipped records, want 1 (rate-limited):\n%s", n, bad, out)
	}
	for _, want := range []string{"topic=" + topic, "partition=0", "offset=3", "skipped_since_last_warning=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("the warning lacks %q:\n%s", want, out)
		}
	}
}
