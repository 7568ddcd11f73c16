package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// ExamplePartitionCommit writes lines under country=… partitions and
// marks each complete partition with a _SUCCESS file.
func ExamplePartitionCommit() {
	in, _ := os.MkdirTemp("", "in")
	out, _ := os.MkdirTemp("", "out")
	defer os.RemoveAll(in)
	defer os.RemoveAll(out)
	_ = os.WriteFile(filepath.Join(in, "a.txt"), []byte("FR,1\nIT,2\nFR,3\n"), 0o644)

	byCountry := file.BucketFunc[string](func(line string, _ file.BucketContext) (string, error) {
		country, _, _ := strings.Cut(line, ",")
		return "country=" + country, nil
	})
	sink, err := file.NewRowSink(out, file.LinesFormat(), file.WithBuckets(byCountry),
		file.PartitionCommit(file.PartitionCommitStrategy{Policies: []file.PartitionCommitter{file.SuccessFile()}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	env := stream.New()
	lines := stream.FromSource(env, file.NewSource(file.TextLines(), []string{in}), watermark.None[string](), "lines")
	stream.SinkTo(lines, sink, "out")
	if _, err := env.Execute(context.Background(), "partitions"); err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range []string{"country=FR", "country=IT"} {
		_, err := os.Stat(filepath.Join(out, p, file.SuccessFileName))
		fmt.Println(p, "committed:", err == nil)
	}
	// Output:
	// country=FR committed: true
	// country=IT committed: true
}
