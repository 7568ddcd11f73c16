package datagen_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/source"
)

// genContext is the "external system" of a data generator: the records the
// suite writes become the generator's function. datagen's bounded splits
// are contiguous index ranges, so with equal-sized splits index k is record
// k%per of split k/per.
type genContext struct {
	data [][]connectortest.Record
	opts []datagen.Option
}

func (c *genContext) Write(split int, recs []connectortest.Record) error {
	c.data[split] = append(c.data[split], recs...)
	return nil
}

func (c *genContext) Source() (source.Source[connectortest.Record, datagen.Split, datagen.EnumState], error) {
	per := len(c.data[0])
	for i, d := range c.data {
		if len(d) != per {
			return nil, fmt.Errorf("split %d holds %d records, split 0 %d: datagen splits have equal sizes", i, len(d), per)
		}
	}
	data := c.data
	gen := func(k int64) connectortest.Record { return data[k/int64(per)][k%int64(per)] }
	opts := append([]datagen.Option{datagen.Count(int64(per * len(data))), datagen.Splits(len(data))}, c.opts...)
	return datagen.New(gen, opts...), nil
}

func (c *genContext) Record(r connectortest.Record) (connectortest.Record, error) { return r, nil }

func (c *genContext) Close() error { return nil }

func TestConformance(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []datagen.Option
	}{
		{"pull", nil},
		{"push", []datagen.Option{datagen.PushAssignment()}},
	} {
		t.Run(c.name, func(t *testing.T) {
			connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[connectortest.Record, datagen.Split, datagen.EnumState], error) {
				if !s.Bounded {
					return nil, fmt.Errorf("datagen computes its records, nothing can be written to it after the start: %w", errors.ErrUnsupported)
				}
				return &genContext{data: make([][]connectortest.Record, s.Splits), opts: c.opts}, nil
			})
		})
	}
}
