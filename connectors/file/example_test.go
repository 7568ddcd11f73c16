package file_test

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Example copies text files into upper-case part files, exactly once.
func Example() {
	in, _ := os.MkdirTemp("", "in")
	out, _ := os.MkdirTemp("", "out")
	defer os.RemoveAll(in)
	defer os.RemoveAll(out)
	_ = os.WriteFile(filepath.Join(in, "a.txt"), []byte("alpha\nbeta\n"), 0o644)
	_ = os.WriteFile(filepath.Join(in, "b.txt.gz"), gzipped("gamma\n"), 0o644)

	sink, err := file.NewRowSink(out, file.LinesFormat(),
		file.WithBuckets(file.BasePathBuckets[string]()),
		file.PartPrefix("upper"), file.PartSuffix(".txt"))
	if err != nil {
		fmt.Println(err)
		return
	}
	// The job id is in every part file name, so that jobs writing under
	// one directory never touch each other's files (by default a new
	// random id, kept in the job's checkpoints).
	env := stream.New(stream.JobID("a1b2c3d4e5f60718"))
	lines := stream.FromSource(env, file.NewSource(file.TextLines(), []string{in}), watermark.None[string](), "lines")
	stream.SinkTo(stream.Map(lines, strings.ToUpper), sink, "upper")
	if _, err := env.Execute(context.Background(), "copy"); err != nil {
		fmt.Println(err)
		return
	}

	entries, _ := os.ReadDir(out)
	var all []string
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(out, e.Name()))
		all = append(all, strings.Fields(string(b))...)
		fmt.Println(e.Name())
	}
	fmt.Println(len(all), "lines")
	// Output:
	// upper-a1b2c3d4e5f60718-0-0.txt
	// 3 lines
}

func gzipped(s string) []byte {
	var b strings.Builder
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	_ = zw.Close()
	return []byte(b.String())
}

// ExampleOnMalformed reads JSON lines with one bad line, first with the
// default policy (the job fails naming the file and byte offset), then
// skipping and counting it.
func ExampleOnMalformed() {
	in, _ := os.MkdirTemp("", "in")
	defer os.RemoveAll(in)
	_ = os.WriteFile(filepath.Join(in, "events.jsonl"), []byte("{\"id\":1}\n{\"id\":\n{\"id\":3}\n"), 0o644)
	type event struct {
		ID int `json:"id"`
	}
	for _, policy := range []file.MalformedPolicy{file.FailOnMalformed, file.SkipMalformed} {
		env := stream.New()
		events := stream.FromSource(env, file.NewSource(file.JSONLines[event](), []string{in}, file.OnMalformed(policy)),
			watermark.None[event](), "events")
		stream.SinkTo(events, print.New[event](print.To(io.Discard)), "discard")
		res, err := env.Execute(context.Background(), "malformed")
		var re *file.RecordError
		if errors.As(err, &re) {
			fmt.Printf("failed: %s at offset %d: malformed=%v\n", filepath.Base(re.File), re.Offset, errors.Is(err, file.ErrMalformed))
			continue
		}
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println("skipped:", res.Counter(metrics.NumRecordsInErrors))
	}
	// Output:
	// failed: events.jsonl at offset 9: malformed=true
	// skipped: 1
}
