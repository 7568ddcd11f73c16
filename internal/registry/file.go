package registry

import (
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func init() {
	MustRegisterSink(Sink{
		Name: "file",
		Description: "Exactly-once JSON-lines part files under a directory (connectors/file). A part file is hidden " +
			"(.part-<job id>-….inprogress) until the checkpoint that prepared it completes, then renamed to its final name.",
		ExactlyOnce: true,
		Options: []Option{
			{Name: "path", Type: String, Required: true, Description: "base directory of the part files"},
			{Name: "prefix", Type: String, Default: "part", Description: "part file name prefix: <prefix>-<job id>-<subtask>-<counter><suffix>"},
			{Name: "suffix", Type: String, Default: ".jsonl", Description: "part file name suffix"},
			{Name: "rolling", Type: Enum, Values: []string{"checkpoint", "size"}, Default: "checkpoint",
				Description: "checkpoint: roll every part file at every checkpoint (output visible per checkpoint); size: Flink's default (128 MiB, 60 s)"},
			{Name: "compact-below", Type: Int, Default: int64(0),
				Description: "merge finished part files smaller than this many bytes into <prefix>-<job id>-compacted-… files (visible once merged, after the checkpoint's commit); 0 = off"},
		},
		Validate: func(o Options) error {
			if o.Int("compact-below") < 0 {
				return fmt.Errorf("compact-below: must be >= 0")
			}
			return nil
		},
		Build: func(c BuildContext, in stream.DataStream[Record]) error {
			opts := []file.SinkOption{
				file.PartPrefix(c.Options.String("prefix")),
				file.PartSuffix(c.Options.String("suffix")),
				file.WithBuckets(file.BasePathBuckets[Record]()),
			}
			if c.Options.String("rolling") == "checkpoint" {
				opts = append(opts, file.Rolling(file.OnCheckpointRolling()))
			}
			if n := c.Options.Int("compact-below"); n > 0 {
				opts = append(opts, file.Compact(file.CompactStrategy{SizeThreshold: n}))
			}
			s, err := file.NewRowSink(c.Options.String("path"), file.JSONLinesFormat[Record](), opts...)
			if err != nil {
				return err
			}
			stream.SinkTo(in, s, c.Name)
			return nil
		},
	})

	MustRegisterSource(Source{
		Name:        "file",
		Description: "Reads JSON-lines files (one object per line; .gz and .zst are decompressed) from files, directories or globs (connectors/file).",
		Options: []Option{
			{Name: "paths", Type: Strings, Required: true, Description: "files, directories (read recursively) or glob patterns"},
			{Name: "discovery", Type: Duration, Default: time.Duration(0), Description: "list the paths again this often and read new files (unbounded); 0 = read once (bounded)"},
			{Name: "on-malformed", Type: Enum, Values: []string{"fail", "skip"}, Default: "fail", Description: "a line that is not a JSON object fails the job, or is skipped and counted in numRecordsInErrors"},
		},
		Validate: func(o Options) error {
			if o.Duration("discovery") < 0 {
				return fmt.Errorf("discovery: must be >= 0")
			}
			return nil
		},
		Build: func(c BuildContext) (stream.DataStream[Record], error) {
			opts := []file.SourceOption{file.SourceLogger(c.Logger)}
			if d := c.Options.Duration("discovery"); d > 0 {
				opts = append(opts, file.ContinuousDiscovery(d))
			}
			if c.Options.String("on-malformed") == "skip" {
				opts = append(opts, file.OnMalformed(file.SkipMalformed))
			}
			src := file.NewSource(file.JSONLines[Record](), c.Options.Strings("paths"), opts...)
			if err := src.Err(); err != nil {
				return stream.DataStream[Record]{}, err
			}
			return stream.FromSource(c.Env, src, watermark.None[Record](), c.Name), nil
		},
	})
}
