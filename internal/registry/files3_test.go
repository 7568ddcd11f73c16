package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/s3"
)

// TestFileS3Options: s3:// paths and the s3.* options are checked
// together: no mixing of s3:// and local paths in one source, s3.*
// options only with s3:// paths, no compaction on s3://, and a malformed
// URL names the option.
func TestFileS3Options(t *testing.T) {
	cases := []struct {
		name string
		sink bool
		opts map[string]any
		want string // "" = valid
	}{
		{"sink on s3", true, map[string]any{"path": "s3://b/out", "s3.endpoint": "http://127.0.0.1:1"}, ""},
		{"sink without a bucket", true, map[string]any{"path": "s3:///out"}, "path: "},
		{"sink compacting on s3", true, map[string]any{"path": "s3://b/out", "compact-below": int64(100)}, "compact-below"},
		{"s3 option on a local sink", true, map[string]any{"path": "out", "s3.region": "eu-west-1"}, "s3.region"},
		{"source on s3", false, map[string]any{"paths": []string{"s3://b/in/*.jsonl", "s3://c/x"}}, ""},
		{"source mixing", false, map[string]any{"paths": []string{"s3://b/in", "local"}}, "mixes"},
		{"source with a glob bucket", false, map[string]any{"paths": []string{"s3://b*/in"}}, "bucket"},
		{"s3 key on a local source", false, map[string]any{"paths": []string{"in"}, "s3.access-key": "k"}, "s3.access-key"},
		{"local sink with defaults", true, map[string]any{"path": "out"}, ""},
		{"local source with defaults", false, map[string]any{"paths": []string{"in"}}, ""},
		// Set to its default, an s3.* option is a setting all the same.
		{"path-style set on a local sink", true, map[string]any{"path": "out", "s3.path-style": true}, "s3.path-style: applies to s3:// paths only"},
		{"part-size set on a local sink", true, map[string]any{"path": "out", "s3.part-size": int64(s3.DefaultPartSize)}, "s3.part-size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validateS3(c.sink)(fileWithDefaults(t, c.sink, c.opts))
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// fileWithDefaults returns m with the file sink's (or source's) option
// defaults, as a pipeline file's options get them (not IsSet).
func fileWithDefaults(t *testing.T, sink bool, m map[string]any) Options {
	t.Helper()
	var schema []Option
	if sink {
		snk, ok := Default().Sink("file")
		if !ok {
			t.Fatal("no file sink")
		}
		schema = snk.Options
	} else {
		src, ok := Default().Source("file")
		if !ok {
			t.Fatal("no file source")
		}
		schema = src.Options
	}
	return NewOptions(m).WithDefaults(schema)
}

// TestFileS3ReadsOutput: a file source with discovery over an s3:// sink's
// prefix is refused like a local one.
func TestFileS3ReadsOutput(t *testing.T) {
	for _, c := range []struct {
		src, sink string
		loop      bool
	}{
		{"s3://b/out", "s3://b/out", true},
		{"s3://b", "s3://b/out", true},
		{"s3://b/o*", "s3://b/out", true},
		{"s3://b/out/sub", "s3://b/out", false},
		{"s3://b/output", "s3://b/out", false},
		{"s3://c/out", "s3://b/out", false},
		{"out", "s3://b/out", false},
	} {
		src := NewOptions(map[string]any{"paths": []string{c.src}, "discovery": time.Second})
		snk := NewOptions(map[string]any{"path": c.sink, "prefix": "part", "suffix": ".jsonl"})
		_, err := checkFileLoop("file", src, snk)
		if (err != nil) != c.loop {
			t.Errorf("source %s, sink %s: error %v, want a loop error: %v", c.src, c.sink, err, c.loop)
		}
	}
}
