package filesink_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/examples/filesink"
	"github.com/sluice-io/sluice/sink"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dirContext is the external system: a directory.
type dirContext struct{ dir string }

func (c *dirContext) Sink() (sink.Sink[string], error)    { return filesink.New(c.dir), nil }
func (c *dirContext) Value(r connectortest.Record) string { return r.String() }
func (c *dirContext) Close() error                        { return nil }

func (c *dirContext) Committed() ([]connectortest.Record, error) {
	lines, err := filesink.Committed(c.dir)
	recs := make([]connectortest.Record, 0, len(lines))
	for _, l := range lines {
		r, perr := connectortest.ParseRecord(l)
		err = errors.Join(err, perr)
		recs = append(recs, r)
	}
	return recs, err
}

// Pending lists the hidden files: in-progress and prepared ones.
func (c *dirContext) Pending() ([]string, error) {
	return filepath.Glob(filepath.Join(c.dir, ".*"))
}

func TestConformance(t *testing.T) {
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
		if s.Guarantee != connectortest.ExactlyOnce {
			return nil, fmt.Errorf("filesink is exactly-once: %w", errors.ErrUnsupported)
		}
		return &dirContext{dir: s.TempDir}, os.MkdirAll(s.TempDir, 0o755)
	}, connectortest.Guarantees(connectortest.ExactlyOnce))
}
