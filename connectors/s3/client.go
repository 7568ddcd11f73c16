package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// ErrInvalidConfig is wrapped by errors about options and URLs.
var ErrInvalidConfig = errors.New("s3: invalid configuration")

// DefaultRegion is the region used when neither [Region] nor AWS_REGION
// says otherwise. S3-compatible servers mostly ignore it, but requests
// are signed for it.
const DefaultRegion = "us-east-1"

// DefaultPartSize is the size of the parts of multipart uploads (8 MiB;
// S3's minimum for every part but the last is 5 MiB).
const DefaultPartSize = 8 << 20

// minPartSize is S3's minimum size of a part that is not the last.
const minPartSize = 5 << 20

// Option configures [New]; see the functions that return one.
type Option func(*config)

type config struct {
	endpoint       string
	region         string
	pathStyle      bool
	access, secret string
	session        string
	partSize       int
	httpClient     *http.Client
	getenv         func(string) string
	errs           []error
}

// Endpoint sets the URL of an S3-compatible server, such as
// http://127.0.0.1:7070 (default: $AWS_ENDPOINT_URL_S3, else
// $AWS_ENDPOINT_URL, else AWS S3 itself).
func Endpoint(u string) Option { return func(c *config) { c.endpoint = u } }

// Region sets the region requests are signed for (default $AWS_REGION,
// else $AWS_DEFAULT_REGION, else [DefaultRegion]).
func Region(r string) Option { return func(c *config) { c.region = r } }

// PathStyle chooses path-style addressing, http://host/bucket/key (the
// default, true: what S3-compatible servers on an address without DNS
// names need), or virtual-hosted style, http://bucket.host/key (false).
func PathStyle(on bool) Option { return func(c *config) { c.pathStyle = on } }

// Credentials sets a static access key and secret key (default:
// $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY and $AWS_SESSION_TOKEN).
// Both or neither must be set.
func Credentials(accessKey, secretKey string) Option {
	return func(c *config) { c.access, c.secret = accessKey, secretKey }
}

// SessionToken sets the session token of temporary credentials, with
// [Credentials] (default: none with Credentials; $AWS_SESSION_TOKEN
// with the keys from the environment).
func SessionToken(tok string) Option { return func(c *config) { c.session = tok } }

// PartSize sets the part size of multipart uploads (default
// [DefaultPartSize]; at least 5 MiB). A writer holds one part in memory
// per open object; a client reuses the buffers of finished uploads.
func PartSize(n int) Option { return func(c *config) { c.partSize = n } }

// HTTPClient sets the HTTP client (default: the SDK's).
func HTTPClient(h *http.Client) Option { return func(c *config) { c.httpClient = h } }

// Getenv sets where the defaults from the environment are read (default
// os.Getenv); tests and the CLI's secret resolution pass their own.
func Getenv(f func(string) string) Option {
	return func(c *config) {
		if f != nil {
			c.getenv = f
		}
	}
}

// Client is a configured S3 client. It is safe for concurrent use.
type Client struct {
	api      *s3.Client
	partSize int
	endpoint string
	// parts recycles the part buffers of finished uploads (*[]byte of
	// capacity partSize): a new buffer per upload would cost partSize
	// bytes of fresh memory, zeroed, for every part file.
	parts sync.Pool
}

// partBuf returns an empty buffer of capacity partSize for an upload.
func (c *Client) partBuf() []byte {
	if b, ok := c.parts.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, c.partSize)
}

// recyclePart returns a buffer of partBuf that nothing reads any more.
func (c *Client) recyclePart(b []byte) {
	if cap(b) == c.partSize {
		b = b[:0]
		c.parts.Put(&b)
	}
}

// New returns a client. It does no I/O: a wrong endpoint or credentials
// show up at the first request, with an error naming the bucket and key.
func New(opts ...Option) (*Client, error) {
	c := config{pathStyle: true, partSize: DefaultPartSize, getenv: os.Getenv}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	env := c.getenv
	if c.endpoint == "" {
		c.endpoint = cmpOr(env("AWS_ENDPOINT_URL_S3"), env("AWS_ENDPOINT_URL"))
	}
	if c.region == "" {
		c.region = cmpOr(env("AWS_REGION"), env("AWS_DEFAULT_REGION"), DefaultRegion)
	}
	if c.access == "" && c.secret == "" {
		c.access, c.secret = env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")
		c.session = cmpOr(c.session, env("AWS_SESSION_TOKEN"))
	}
	errs := c.errs
	if (c.access == "") != (c.secret == "") {
		errs = append(errs, fmt.Errorf("%w: set both the access key and the secret key, or neither", ErrInvalidConfig))
	}
	if c.access == "" {
		errs = append(errs, fmt.Errorf("%w: no credentials: set the access key and secret key (options, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)", ErrInvalidConfig))
	}
	if c.partSize < minPartSize {
		errs = append(errs, fmt.Errorf("%w: part size %d is below S3's minimum of 5 MiB", ErrInvalidConfig, c.partSize))
	}
	if c.endpoint != "" {
		u, err := url.Parse(c.endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%w: endpoint %q is not an http:// or https:// URL", ErrInvalidConfig, c.endpoint))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	o := s3.Options{
		Region:                     c.region,
		Credentials:                aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(c.access, c.secret, c.session)),
		UsePathStyle:               c.pathStyle,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		RetryMaxAttempts:           5,
	}
	if c.endpoint != "" {
		o.BaseEndpoint = aws.String(c.endpoint)
	}
	if c.httpClient != nil {
		o.HTTPClient = c.httpClient
	}
	cl := &Client{partSize: c.partSize, endpoint: c.endpoint}
	o.APIOptions = append(o.APIOptions, authErrors(cl.ServerName()))
	cl.api = s3.New(o)
	return cl, nil
}

// ServerName names the server in errors: "endpoint <URL>", or "AWS S3".
func (c *Client) ServerName() string {
	if c.endpoint == "" {
		return "AWS S3"
	}
	return "endpoint " + c.endpoint
}

// API returns the underlying SDK client, for what this package does not
// wrap (creating buckets, listing objects in tests).
func (c *Client) API() *s3.Client { return c.api }

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// IsURL reports whether p is an s3:// URL.
func IsURL(p string) bool { return strings.HasPrefix(p, "s3://") }

// ParseURL splits s3://bucket/key into the bucket and the key ("" for the
// bucket's root; a trailing '/' is kept).
func ParseURL(u string) (bucket, key string, err error) {
	rest, ok := strings.CutPrefix(u, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%w: %q is not an s3:// URL", ErrInvalidConfig, u)
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%w: %q names no bucket (want s3://bucket/key)", ErrInvalidConfig, u)
	}
	if strings.ContainsAny(bucket, "*?[") {
		return "", "", fmt.Errorf("%w: %q: a bucket name cannot be a pattern", ErrInvalidConfig, u)
	}
	return bucket, key, nil
}

// CreateBucket creates a bucket; one that exists and is owned by the
// caller is no error. For tests and examples.
func (c *Client) CreateBucket(ctx context.Context, bucket string) error {
	_, err := c.api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	if err != nil && !isCode(err, "BucketAlreadyOwnedByYou", "BucketAlreadyExists") {
		return fmt.Errorf("s3: create bucket %s: %w", bucket, err)
	}
	return nil
}
