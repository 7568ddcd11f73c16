package s3_test

import (
	"fmt"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/s3"
)

// A file sink writing JSON lines to s3://my-bucket/orders/ on an
// S3-compatible server, and a source reading them back.
func Example() {
	c, err := s3.New(s3.Endpoint("http://127.0.0.1:7070"), s3.Credentials("access", "secret"))
	if err != nil {
		panic(err)
	}
	bucket, prefix, _ := s3.ParseURL("s3://my-bucket/orders")
	snk, err := file.NewRowSink(prefix, file.JSONLinesFormat[map[string]any](), file.WithObjectStore(c.Store(bucket)), file.PartSuffix(".jsonl"))
	if err != nil {
		panic(err)
	}
	src := file.NewSource(file.JSONLines[map[string]any](), []string{"s3://my-bucket/orders"}, file.WithSourceFS(c.FS()))
	fmt.Println(bucket, prefix, snk != nil, src.Err())
	// Output: my-bucket orders true <nil>
}
