package registry

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// DatagenRecord is the record datagen emits for index i: {"id": i,
// "amount": i*37 mod 1000, "user": "user-<i mod 10>"}. It is deterministic,
// so an output can be checked against the input.
func DatagenRecord(i int64) Record {
	return Record{"id": i, "amount": i * 37 % 1000, "user": fmt.Sprintf("user-%d", i%10)}
}

func init() {
	MustRegisterSource(Source{
		Name: "datagen",
		Description: `Deterministic generator. Record i is {"id": i, "amount": i*37 mod 1000, "user": "user-<i mod 10>"}; ` +
			"ids are spread over splits that checkpoint their position.",
		Options: []Option{
			{Name: "count", Type: Int, Default: int64(0), Description: "records to generate, ids 0..count-1; 0 = unbounded"},
			{Name: "splits", Type: Int, Default: int64(1), Description: "number of splits (independent of parallelism)"},
			{Name: "rate", Type: Float, Default: float64(0), Description: "records per second over the whole source; 0 = unlimited"},
		},
		Validate: func(o Options) error {
			switch {
			case o.Int("count") < 0:
				return fmt.Errorf("count: must be >= 0 (0 = unbounded)")
			case o.Int("splits") < 1:
				return fmt.Errorf("splits: must be >= 1")
			case o.Float("rate") < 0:
				return fmt.Errorf("rate: must be >= 0 (0 = unlimited)")
			}
			return nil
		},
		Build: func(c BuildContext) (stream.DataStream[Record], error) {
			opts := []datagen.Option{datagen.Count(c.Options.Int("count")), datagen.Splits(int(c.Options.Int("splits")))}
			if r := c.Options.Float("rate"); r > 0 {
				opts = append(opts, datagen.RatePerSecond(r))
			}
			src := datagen.New(DatagenRecord, opts...)
			if err := src.Err(); err != nil {
				return stream.DataStream[Record]{}, err
			}
			return stream.FromSource(c.Env, src, watermark.None[Record](), c.Name, stream.UID(c.UID)), nil
		},
	})

	MustRegisterSink(Sink{
		Name:        "print",
		Description: "Prints each record as one line of JSON (at-least-once: lines appear as they are written, not at checkpoints).",
		Options: []Option{
			{Name: "prefix", Type: String, Default: "", Description: `line prefix ("prefix> "; with parallelism > 1 "prefix:subtask> ")`},
			{Name: "target", Type: Enum, Values: []string{"stdout", "stderr"}, Default: "stdout", Description: "where to print"},
		},
		Build: func(c BuildContext, in stream.DataStream[Record]) error {
			w := c.Stdout
			if c.Options.String("target") == "stderr" || w == nil {
				w = os.Stderr
			}
			lines := stream.Map(in, encodeJSON, stream.Name(c.Name+"-encode"))
			stream.SinkTo(lines, print.New[string](print.To(w), print.Prefix(c.Options.String("prefix"))), c.Name, stream.UID(c.UID))
			return nil
		},
	})
}

// encodeJSON renders a record as one line of JSON. Records come from JSON
// or from datagen, so encoding cannot fail short of a bug; a failure is
// rendered as a JSON error object rather than dropped silently.
func encodeJSON(r Record) string {
	b, err := json.Marshal(r)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return string(b)
}
