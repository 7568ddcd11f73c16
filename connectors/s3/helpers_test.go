package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The SDK's HTTP transport keeps idle connections with their
		// reader and writer goroutines.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"))
}

// testClient returns a client of the server that scripts/s3.sh started
// (SLUICE_S3_ENDPOINT, SLUICE_S3_ACCESS_KEY, SLUICE_S3_SECRET_KEY) and a
// new bucket of the test's own; it skips the test without a server.
func testClient(t testing.TB) (*Client, string) {
	t.Helper()
	ep := os.Getenv("SLUICE_S3_ENDPOINT")
	if ep == "" {
		t.Skip("SLUICE_S3_ENDPOINT is not set: start an S3-compatible server with scripts/s3.sh (scripts/test.sh does)")
	}
	c, err := New(Endpoint(ep), Credentials(os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")), PartSize(minPartSize))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	bucket := "t-" + strings.ToLower(hex.EncodeToString(b))
	if err := c.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	return c, bucket
}

// listObjects returns the keys and contents of every object under prefix.
func listObjects(t testing.TB, c *Client, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for range 10000 {
		page, err := c.api.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatalf("list s3://%s/%s: %v", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			g, err := c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatalf("get %s: %v", aws.ToString(o.Key), err)
			}
			b, err := io.ReadAll(g.Body)
			g.Body.Close()
			if err != nil {
				t.Fatalf("read %s: %v", aws.ToString(o.Key), err)
			}
			out[aws.ToString(o.Key)] = b
		}
		if !aws.ToBool(page.IsTruncated) {
			return out
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	t.Fatal("too many pages")
	return nil
}

// uploads lists the unfinished multipart uploads in bucket.
func uploads(t testing.TB, c *Client, bucket string) []string {
	t.Helper()
	ups, err := c.Store(bucket).Uploads(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range ups {
		out = append(out, u.Key+"#"+u.UploadID)
	}
	slices.Sort(out)
	return out
}

func putObject(t testing.TB, c *Client, bucket, key string, data []byte) {
	t.Helper()
	_, err := c.api.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)})
	if err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

var errUnsupported = errors.ErrUnsupported

func randSuffix() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}
