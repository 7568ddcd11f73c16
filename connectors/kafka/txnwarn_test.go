package kafka

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// captureHandler is a slog.Handler that keeps every record it handles.
type captureHandler struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newCaptureHandler() captureHandler {
	return captureHandler{mu: &sync.Mutex{}, recs: &[]slog.Record{}}
}

func (h captureHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, r.Clone())
	return nil
}
func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h captureHandler) WithGroup(string) slog.Handler      { return h }

// warnings returns the warnings whose message contains substr, with their
// attributes.
func (h captureHandler) warnings(substr string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range *h.recs {
		if r.Level != slog.LevelWarn || !strings.Contains(r.Message, substr) {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		out = append(out, attrs)
	}
	return out
}

// TestTransactionTimeoutWarning runs exactly-once jobs with a checkpoint
// interval of 2s: a transaction timeout of 1m is shorter than interval plus
// the default 1m restart allowance and is warned about once (parallelism 2,
// one warning per sink); 2m is not, nor is 1m with a 30s allowance, nor is
// anything with periodic checkpoints off.
func TestTransactionTimeoutWarning(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	const interval = 2 * time.Second
	cases := []struct {
		name     string
		timeout  time.Duration
		interval time.Duration
		opts     []SinkOption
		warn     bool
	}{
		{"1m timeout, default allowance", time.Minute, interval, nil, true},
		{"2m timeout, default allowance", 2 * time.Minute, interval, nil, false},
		{"1m timeout, 30s allowance", time.Minute, interval, []SinkOption{RestartAllowance(30 * time.Second)}, false},
		{"1m timeout, no periodic checkpoints", time.Minute, 0, nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newCaptureHandler()
			gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(100), datagen.Splits(2))
			opts := append([]SinkOption{DefaultTopic(uniqueName("warn")), DeliveryGuarantee(ExactlyOnce),
				TransactionalIDPrefix(uniqueName("warn")), TransactionTimeout(tc.timeout), SinkLogger(slog.New(h)),
				SinkClientOpts(kgoAllowAutoTopicCreation())}, tc.opts...)
			sk, err := NewSink(brokers, indexSerializer(gen), opts...)
			if err != nil {
				t.Fatal(err)
			}
			envOpts := []stream.Option{stream.Parallelism(2), stream.Logger(stream.DiscardLogger())}
			if tc.interval > 0 {
				envOpts = append(envOpts, stream.CheckpointEvery(tc.interval))
			}
			env := stream.New(envOpts...)
			stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := env.Execute(ctx, "txn-timeout-warning"); err != nil {
				t.Fatal(err)
			}
			ws := h.warnings("TransactionTimeout is shorter than the checkpoint interval plus the restart allowance")
			switch {
			case tc.warn && len(ws) != 1:
				t.Fatalf("got %d warnings, want 1 (once per sink)", len(ws))
			case !tc.warn && len(ws) != 0:
				t.Fatalf("got warning %v, want none", ws)
			case tc.warn:
				w := ws[0]
				if w["transactionTimeout"] != "1m0s" || w["checkpointInterval"] != "2s" || w["restartAllowance"] != "1m0s" {
					t.Fatalf("warning attributes %v, want transactionTimeout=1m0s checkpointInterval=2s restartAllowance=1m0s", w)
				}
				t.Logf("warning: %v", w)
			}
		})
	}
}
