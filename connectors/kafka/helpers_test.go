package kafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// brokersEnv names the real broker started by scripts/kafka.sh.
const brokersEnv = "SLUICE_KAFKA_BROKERS"

// backend is a Kafka cluster a test runs against.
type backend struct {
	name    string
	brokers []string
}

// forEachBackend runs fn against a fresh kfake cluster and, when
// SLUICE_KAFKA_BROKERS is set, against that real broker.
func forEachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	t.Helper()
	t.Run("kfake", func(t *testing.T) {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		fn(t, backend{name: "kfake", brokers: c.ListenAddrs()})
	})
	t.Run("real", func(t *testing.T) {
		b := realBrokers(t)
		fn(t, backend{name: "real", brokers: b})
	})
}

func realBrokers(t *testing.T) []string {
	t.Helper()
	v := os.Getenv(brokersEnv)
	if v == "" {
		t.Skipf("%s is not set: start a real broker with `eval \"$(scripts/kafka.sh start)\"; export %s` to run this against Apache Kafka", brokersEnv, brokersEnv)
	}
	return strings.Split(v, ",")
}

var topicSeq atomic.Int64

// uniqueName returns a name unique in this process and across runs.
func uniqueName(base string) string {
	return fmt.Sprintf("%s-%d-%d", base, time.Now().UnixNano(), topicSeq.Add(1))
}

func newClient(t *testing.T, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func createTopic(t *testing.T, brokers []string, partitions int32) string {
	t.Helper()
	name := uniqueName("t")
	adm := kadm.NewClient(newClient(t, brokers))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// readCommitted reads topic with a read_committed consumer until it has
// want records in total (bounded by two minutes) or, with want < 0, until
// nothing arrives for quiet. opts are added to the consumer's options
// (TLS, SASL).
func readCommitted(t *testing.T, brokers []string, topic string, want int, quiet time.Duration, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := newClient(t, brokers, append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	var out []*kgo.Record
	deadline := time.Now().Add(2 * time.Minute)
	for (want < 0 || len(out) < want) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), quiet)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r); n++ })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("consume %s: %v", topic, e.Err)
			}
		}
		if n == 0 && want < 0 {
			break // quiet: everything committed so far is read
		}
	}
	cl.Close()
	return out
}
