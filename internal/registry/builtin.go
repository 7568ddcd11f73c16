package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// DatagenRecord is the record datagen emits for index i: {"id": i,
// "amount": i*37 mod 1000, "user": "user-<i mod 10>"}. It is deterministic,
// so an output can be checked against the input.
func DatagenRecord(i int64) Record { return NewRecord(DatagenValue(i)) }

// DatagenValue is the value of DatagenRecord(i).
func DatagenValue(i int64) map[string]any {
	return map[string]any{"id": i, "amount": i * 37 % 1000, "user": fmt.Sprintf("user-%d", i%10)}
}

// MaxSplits bounds datagen's splits option (each split is state in every
// checkpoint).
const MaxSplits = 1 << 16

func init() {
	MustRegisterSource(Source{
		Name: "datagen",
		Description: `Deterministic generator. Record i is {"id": i, "amount": i*37 mod 1000, "user": "user-<i mod 10>"}; ` +
			"ids are spread over splits that checkpoint their position.",
		Options: []Option{
			{Name: "count", Type: Int, Default: int64(0), Check: AtLeast(0), Description: "records to generate, ids 0..count-1; 0 = unbounded"},
			{Name: "splits", Type: Int, Default: int64(1), Check: Between(1, MaxSplits), Description: "number of splits (independent of parallelism)"},
			{Name: "rate", Type: Float, Default: float64(0), Check: AtLeast(0), Description: "records per second over the whole source; 0 = unlimited"},
		},
		Validate: func(o Options) error {
			if n, s := o.Int("count"), o.Int("splits"); n > 0 && s > n {
				return fmt.Errorf("splits: %d splits for %d records: some would be empty (want at most count)", s, n)
			}
			return nil
		},
		Fields:         []string{"id", "amount", "user"},
		MaxParallelism: func(o Options) int { return int(o.Int("splits")) },
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
			lines := stream.Map(in, encodeJSONLine, stream.Name(c.Name+"-encode"))
			stream.SinkTo(lines, print.New[string](print.To(w), print.Prefix(c.Options.String("prefix"))), c.Name, stream.UID(c.UID))
			return nil
		},
	})
}

// printCodec is the print sink's format: JSON, any value.
var printCodec, _ = format.Builtin().New("json", format.Config{AnyJSON: true})

// encodeJSONLine renders a record's value as one line of JSON: its bytes
// as read when they are JSON (an object) already, without a line break. A
// failure is rendered as a JSON error object rather than dropped
// silently.
func encodeJSONLine(r Record) string {
	if b, c, ok := r.Bytes(); ok && (c.Identity() == "json-object" || c.Identity() == "json") && !bytes.ContainsAny(b, "\r\n") {
		return string(b)
	}
	b, err := encodeValue(context.Background(), printCodec, "", nil, r)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return string(b)
}
