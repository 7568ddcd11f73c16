package filesink_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/examples/filesink"
	"github.com/sluice-io/sluice/sink"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// dirContext is the external system: a directory.
type dirContext struct {
	dir    string
	broken bool // the sink without its cleanup
}

func (c *dirContext) Sink() (sink.Sink[string], error) {
	if c.broken {
		return filesink.NewWithoutCleanup(c.dir), nil
	}
	return filesink.New(c.dir), nil
}

func (c *dirContext) Value(r connectortest.Record) string { return r.String() }
func (c *dirContext) Close() error                        { return nil }

// Committed reads the committed files' lines, oldest checkpoint first.
func (c *dirContext) Committed() ([]connectortest.Record, error) {
	files, err := filepath.Glob(filepath.Join(c.dir, "part-*.txt")) // sorted: by checkpoint, then subtask
	var lines []string
	for _, f := range files {
		b, rerr := os.ReadFile(f)
		err = errors.Join(err, rerr)
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
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

func newContext(broken bool) func(connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
	return func(s connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
		if s.Guarantee != connectortest.ExactlyOnce {
			return nil, fmt.Errorf("filesink is exactly-once: %w", errors.ErrUnsupported)
		}
		return &dirContext{dir: s.TempDir, broken: broken}, os.MkdirAll(s.TempDir, 0o755)
	}
}

func TestConformance(t *testing.T) {
	connectortest.TestSink(t, newContext(false), connectortest.Guarantees(connectortest.ExactlyOnce))
}

// The suite catches the sink with its cleanup removed: the cases that
// leave prepared files behind fail, the others pass.
func TestConformanceCatchesMissingCleanup(t *testing.T) {
	mustFail := []string{"cleanup-aborted", "cleanup-aborted/full-failover", "cleanup-aborted/scale-down", "failure/exactly-once/after-prepare"}
	if !testing.Short() {
		mustFail = append(mustFail, "failure/exactly-once/after-prepare/full-failover")
	}
	connectortest.ExpectSinkFailures(t, newContext(true), mustFail,
		[]string{"write/exactly-once", "metrics", "recommit-restored", "nothing-visible-before-commit", "restore/commit-in-flight", "restore/commit-in-flight-applied"},
		connectortest.Guarantees(connectortest.ExactlyOnce))
}
