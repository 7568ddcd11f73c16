package format

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
	"go.uber.org/goleak"
)

// TestMain checks that no codec leaves a goroutine behind (codecs have no
// Close: their registry clients keep no connections).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestNoIdleConnections: after a codec's requests, no connection to a
// registry that is still up stays open (no goroutines of idle
// keep-alive connections; codecs have no Close).
func TestNoIdleConnections(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	ignore := goleak.IgnoreCurrent()
	rc := registryConfig(reg, userV1Small)
	rc.AutoRegister = true
	c := newCodec(t, "avro", Config{Registry: rc})
	b, err := c.Encode(context.Background(), "t", nil, map[string]any{"id": int64(1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newCodec(t, "avro", Config{Registry: registryConfig(reg, "")}).Decode(context.Background(), "t", b); err != nil {
		t.Fatal(err)
	}
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
}
