package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func init() {
	MustRegisterSink(Sink{
		Name: "file",
		Description: "Exactly-once part files under a directory, one record per line in format (JSON lines by default), or Avro container or Parquet files " +
			"(a file per checkpoint), optionally under Hive-style partition directories (partition-by) (connectors/file). A part file is hidden " +
			"(.part-<job id>-….inprogress) until the checkpoint that prepared it completes, then renamed to its final name.",
		ExactlyOnce: true,
		Options: append([]Option{
			{Name: "path", Type: String, Required: true, Description: "base directory of the part files, or s3://bucket/prefix"},
			{Name: "prefix", Type: String, Default: "part", Description: "part file name prefix: <prefix>-<job id>-<subtask>-<counter><suffix>"},
			{Name: "suffix", Type: String, Description: "part file name suffix; default: the format's: .jsonl (json), .csv, .txt (string, raw), .avro, .parquet"},
			{Name: "rolling", Type: Enum, Values: []string{"checkpoint", "size"}, Default: "checkpoint",
				Description: "checkpoint: roll every part file at every checkpoint (output visible per checkpoint); size: Flink's default (128 MiB, 60 s), " +
					"and avro and parquet files still roll at every checkpoint too (a file is complete only when closed)"},
			{Name: "partition-by", Type: Strings, Default: []string{},
				Description: "Hive-style partition directories, one level per item: a field (country → country=FR/), or name=<Go time layout>@<field or meta.timestamp> " +
					"(dt=2006-01-02@meta.timestamp → dt=2026-12-01/; the field a time, an RFC 3339 string or epoch milliseconds; in UTC); " +
					"a missing, null or empty value is __HIVE_DEFAULT_PARTITION__; default: none (files directly under path)"},
			{Name: "compact-below", Type: Int, Default: int64(0), Check: AtLeast(0),
				Description: "merge finished part files smaller than this many bytes into <prefix>-<job id>-compacted-… files (visible once merged, after the checkpoint's commit); 0 = off"},
			{Name: "file-mode", Type: String, Default: "0600", Check: checkFileMode,
				Description: "permission of the part files, octal (before the umask); directories the sink creates get x where r is set (0640 → 0750)"},
		}, append(append(fileFormatOptions(true), s3Options()...), partitionCommitOptions()...)...),
		Validate:    allValid(validateFileFormat(true), validateS3(true), validatePartitionCommit),
		CheckSource: checkFileLoop,
		Step:        fileSinkStep,
		Build: func(c BuildContext, in stream.DataStream[Record]) error {
			base, s3opts, err := s3SinkOptions(c.Options)
			if err != nil {
				return err
			}
			opts := []file.SinkOption{
				file.PartPrefix(c.Options.String("prefix")),
				file.PartSuffix(fileSuffix(c.Options)),
				file.WithBuckets(file.BasePathBuckets[Record]()),
			}
			parts, err := parsePartitionBy(c.Options.Strings("partition-by"))
			if err != nil {
				return optErr("partition-by", "%v", err)
			}
			if len(parts) > 0 {
				opts = append(opts, file.WithBuckets(recordPartitions(parts)))
			}
			if c.Options.String("rolling") == "checkpoint" {
				opts = append(opts, file.Rolling(file.OnCheckpointRolling()))
			}
			mode, err := parseFileMode(c.Options.String("file-mode"))
			if err != nil {
				return err
			}
			opts = append(opts, file.FileMode(mode))
			opts = append(opts, s3opts...)
			pc, err := partitionCommitOption(c)
			if err != nil {
				return err
			}
			if pc != nil {
				opts = append(opts, pc)
			}
			if !c.StepApplied {
				step, _, err := fileSinkStep(c.Name, c.Options)
				if err != nil {
					return err
				}
				if step != nil {
					in = stream.TryMap(in, step, stream.Name(c.Name+"-check"))
				}
			}
			name, opt := valueFormat(c.Options)
			if isBulkFormat(name) {
				text, sopt, err := schemaText(c.Options)
				if err != nil {
					return optErr(sopt, "%v", err)
				}
				f, _ := bulkFormat(c.Options, text)
				if err := f.Err(); err != nil {
					return err
				}
				if n := c.Options.Int("compact-below"); n > 0 {
					var decode file.Format[map[string]any] = file.ParquetFile()
					if name == "avro" {
						decode = file.AvroFile("")
					}
					opts = append(opts, file.Compact(file.CompactStrategy{SizeThreshold: n, Compactor: file.RecordWiseCompactor(decode, file.BulkFormat[map[string]any](f))}))
				}
				s, err := file.NewBulkSink(base, file.BulkFormat[Record](recordBulk{f: f, sink: c.Name}), opts...)
				if err != nil {
					return err
				}
				stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
				return nil
			}
			if n := c.Options.Int("compact-below"); n > 0 {
				opts = append(opts, file.Compact(file.CompactStrategy{SizeThreshold: n}))
			}
			codec, err := newCodec(c.Options, format.Value, name, opt)
			if err != nil {
				return err
			}
			s, err := file.NewRowSink(base, lineFormat{codec}, opts...)
			if err != nil {
				return err
			}
			stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
			return nil
		},
	})

	MustRegisterSource(Source{
		Name: "file",
		Description: "Reads files with one record per line in format (JSON objects by default; .gz and .zst are decompressed), or Avro container or Parquet files, from files, directories or globs (connectors/file); " +
			"records carry meta.path and meta.offset (the line's byte offset; avro: its block's; parquet: its row number).",
		Options: append([]Option{
			{Name: "paths", Type: Strings, Required: true, Description: "files, directories (read recursively) or glob patterns; or s3://bucket/key URLs: an object, a prefix (every object under key/) or a glob (the s3.* options)"},
			{Name: "discovery", Type: Duration, Default: time.Duration(0), Check: AtLeast(0), Description: "list the paths again this often and read new files (unbounded); 0 = read once (bounded)"},
			{Name: "on-malformed", Type: Enum, Values: Policies, Default: string(PolicyFail), Description: "a line the format cannot decode (json: not a JSON object, or invalid UTF-8 or a repeated key): fail fails the job at once (no restarts) naming file, line and an excerpt; skip skips it, counted in numRecordsInErrors and logged (rate-limited); dead-letter sends it, with file, split and offset, to the pipeline's dead-letter sink"},
		}, append(fileFormatOptions(false), s3Options()...)...),
		Validate: allValid(validateS3(false), func(o Options) error {
			if o.Duration("discovery") < 0 {
				return fmt.Errorf("discovery: must be >= 0")
			}
			return nil
		}, validateFileFormat(false)),
		Build: func(c BuildContext) (stream.DataStream[Record], error) {
			opts := []file.SourceOption{file.SourceLogger(c.Logger)}
			s3opts, err := s3SourceOptions(c.Options)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			opts = append(opts, s3opts...)
			if d := c.Options.Duration("discovery"); d > 0 {
				opts = append(opts, file.ContinuousDiscovery(d))
			}
			switch Policy(c.Options.String("on-malformed")) {
			case PolicySkip:
				opts = append(opts, file.OnMalformed(file.SkipMalformed))
			case PolicyDeadLetter:
				name := c.Name
				opts = append(opts, file.OnMalformed(file.EmitMalformed), file.MalformedAs(func(m file.Malformed) Record {
					return MarkDeadLetter(&DeadLetter{Error: m.Err.Error(), Operator: name, Split: m.Split, File: m.File, Offset: m.Offset, Raw: m.Raw})
				}))
			}
			if c.Positions {
				opts = append(opts, file.PositionAs(func(r Record, p file.Position) Record {
					return WithPosition(r, Position{Split: p.Split, File: p.File, Offset: p.Offset})
				}))
			}
			f, err := fileSourceFormat(c.Options, c.DecodeValues, c.ValuesReplaced)
			if err != nil {
				return stream.DataStream[Record]{}, err
			}
			src := file.NewSource(f, c.Options.Strings("paths"), opts...)
			if err := src.Err(); err != nil {
				return stream.DataStream[Record]{}, err
			}
			return stream.FromSource(c.Env, src, watermark.None[Record](), c.Name, stream.UID(c.UID)), nil
		},
		DeadLetters: func(o Options) bool { return Policy(o.String("on-malformed")) == PolicyDeadLetter },
	})
}

// checkFileLoop refuses a file sink whose output a file source with
// discovery would read: the job would read its own output again and again
// (100 input lines became 3,800). Without discovery the source lists its
// paths once, when the job starts — before any output of this job is
// visible, and the listing is kept in the checkpoints — so the job reads
// no output of its own; but a later run of the pipeline reads the earlier
// runs' output as input. That may be meant (rewriting a directory in
// place), so it is a warning.
func checkFileLoop(sourceType string, source, sink Options) (string, error) {
	if sourceType != "file" {
		return "", nil
	}
	base := sink.String("path")
	suffix := fileSuffix(sink)
	outputs := []string{
		sink.String("prefix") + "-0123456789abcdef-0-0" + suffix,
		sink.String("prefix") + "-fedcba9876543210-compacted-1-0" + suffix,
	}
	if len(sink.Strings("partition-by")) > 0 {
		outputs = append(outputs, "x=1/"+outputs[0])
	}
	// Values from the environment are never shown (docs/cli.md): the
	// field names them instead.
	sinkDesc := fmt.Sprintf("%q (%s)", base, absPath(base))
	if strings.HasPrefix(base, "s3://") {
		sinkDesc = fmt.Sprintf("%q", base)
	}
	if sink.FromEnvironment("path") {
		sinkDesc = "sink.options.path (value from the environment not shown)"
	}
	for _, p := range source.Strings("paths") {
		if !readsOutput(p, base, outputs) {
			continue
		}
		srcDesc := fmt.Sprintf("%q", p)
		if source.FromEnvironment("paths") {
			srcDesc = "in source.options.paths (value from the environment not shown)"
		}
		if d := source.Duration("discovery"); d > 0 {
			return "", fmt.Errorf("the file sink's path %s is under the file source's path %s, which is listed again every %s (discovery): "+
				"the job would read its own output again and again; write the output elsewhere, or read without discovery",
				sinkDesc, srcDesc, d)
		}
		return fmt.Sprintf("the file sink's path %s is under the file source's path %s: this run reads only the files there when it starts, "+
			"but a later run of this pipeline reads this run's output as input", sinkDesc, srcDesc), nil
	}
	return "", nil
}

// readsOutput reports whether the file source path (a file, a directory
// read recursively, or a glob) covers a file that a file sink with base
// directory base writes (outputs are sample names of such files; the CLI's
// file sink writes them directly under base). Paths are compared absolute,
// as given and with symbolic links resolved as far as they exist.
func readsOutput(src, base string, outputs []string) bool {
	if strings.HasPrefix(src, "s3://") || strings.HasPrefix(base, "s3://") {
		return s3ReadsOutput(src, base)
	}
	bases := pathForms(base)
	if strings.ContainsAny(src, "*?[") {
		for _, g := range globForms(src) {
			for _, b := range bases {
				// A matching directory is read recursively.
				for a := b; ; a = filepath.Dir(a) {
					if ok, _ := filepath.Match(g, a); ok && !hiddenBetween(a, b) {
						return true
					}
					if a == filepath.Dir(a) {
						break
					}
				}
				for _, o := range outputs {
					if ok, _ := filepath.Match(g, filepath.Join(b, o)); ok {
						return true
					}
				}
			}
		}
		// What the glob matches now, symbolic links included.
		matches, _ := filepath.Glob(src)
		for _, m := range matches {
			if readsOutput(m, base, outputs) {
				return true
			}
		}
		return false
	}
	if fi, err := os.Stat(src); err == nil && !fi.IsDir() {
		return false // one file: read once, whatever writes beside it
	}
	for _, p := range pathForms(src) {
		for _, b := range bases {
			if rel, err := filepath.Rel(p, b); err == nil && filepath.IsLocal(rel) {
				if !hiddenBetween(p, b) {
					return true
				}
			}
		}
	}
	return false
}

// hiddenBetween reports whether a path component below dir down to p is
// hidden (starts with '.' or '_'): the file source skips such directories.
func hiddenBetween(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == "." {
		return false
	}
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(c, ".") || strings.HasPrefix(c, "_") {
			return true
		}
	}
	return false
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return filepath.Clean(p)
}

// pathForms returns p absolute, and also with its symbolic links resolved
// as far as its leading components exist.
func pathForms(p string) []string {
	a := absPath(p)
	r := resolveExisting(a)
	if r == a {
		return []string{a}
	}
	return []string{a, r}
}

// resolveExisting resolves the symbolic links of the longest existing
// leading part of the absolute path a and appends the rest.
func resolveExisting(a string) string {
	var rest []string
	for d := a; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		if d == filepath.Dir(d) {
			return a
		}
		rest = append([]string{filepath.Base(d)}, rest...)
	}
}

// globForms returns the glob absolute, and also with the symbolic links of
// its leading components without wildcards resolved.
func globForms(g string) []string {
	a := absPath(g)
	parts := strings.Split(a, string(filepath.Separator))
	i := 0
	for i < len(parts) && !strings.ContainsAny(parts[i], "*?[") {
		i++
	}
	lead := string(filepath.Separator) + filepath.Join(parts[:i]...)
	r := resolveExisting(lead)
	if r == lead {
		return []string{a}
	}
	return []string{a, filepath.Join(append([]string{r}, parts[i:]...)...)}
}

// parseFileMode parses an octal permission such as 0640.
func parseFileMode(s string) (fs.FileMode, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0o"), "0"), 8, 32)
	if err != nil || v&^0o777 != 0 {
		return 0, errors.New("want an octal permission such as 0600 or 0640")
	}
	if v&0o600 != 0o600 {
		return 0, errors.New("the owner must be able to read and write (0600 at least)")
	}
	return fs.FileMode(v), nil
}

func checkFileMode(v any) error {
	_, err := parseFileMode(v.(string))
	return err
}
