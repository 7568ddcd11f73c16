package connectortest

import (
	"testing"
	"time"
)

// Option configures TestSource and TestSink.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	records    int64
	seed       int64
	guarantees []Guarantee
	unordered  bool
	timeout    time.Duration
	skip       map[string]string
	only       map[string]bool // if set, every other case is skipped (the suite's own tests)
}

func defaultConfig(guarantees ...Guarantee) config {
	c := config{records: 2000, seed: 1, guarantees: guarantees, timeout: time.Minute, skip: map[string]string{}}
	if testing.Short() {
		c.records = 500
	}
	return c
}

func newConfig(defaults []Guarantee, opts []Option) config {
	c := defaultConfig(defaults...)
	for _, o := range opts {
		o.apply(&c)
	}
	return c
}

// RecordsPerSplit sets how many records the suite writes into each split
// (default 2000, 500 with -short). Cases that pause a job halfway need at
// least a few hundred.
func RecordsPerSplit(n int64) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.records = n
		}
	})
}

// Seed sets the seed the test data is generated from (default 1).
func Seed(seed int64) Option { return optionFunc(func(c *config) { c.seed = seed }) }

// Guarantees sets the delivery guarantees to check. For a source it is the
// guarantee the source claims behind an exactly-once sink; the strongest
// one listed is checked (default ExactlyOnce). For a sink, the cases that
// depend on the guarantee run once per guarantee listed (default
// ExactlyOnce and AtLeastOnce; a context that returns an error wrapping
// errors.ErrUnsupported for one skips its cases).
func Guarantees(gs ...Guarantee) Option { return optionFunc(func(c *config) { c.guarantees = gs }) }

// Unordered stops the suite from checking the order of records within a
// split, for sinks whose committed view has no order (default: checked
// under exactly-once).
func Unordered() Option { return optionFunc(func(c *config) { c.unordered = true }) }

// CaseTimeout bounds each job the suite runs (default 1m). A job that does
// not end in time fails its case.
func CaseTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.timeout = d
		}
	})
}

// SkipCase skips the case with this name (as printed by go test -v after
// the suite's test name, e.g. "resume/scale-up"), giving the reason in the
// test output. Use it for properties the connector cannot have. Default:
// every case runs.
func SkipCase(name, reason string) Option {
	return optionFunc(func(c *config) { c.skip[name] = reason })
}

func (c *config) strongest() Guarantee {
	g := AtLeastOnce
	for _, x := range c.guarantees {
		if x == ExactlyOnce {
			g = ExactlyOnce
		}
	}
	return g
}
