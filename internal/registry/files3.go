package registry

import (
	"fmt"
	"strings"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/s3"
)

// The file connectors on S3-compatible object storage: s3:// paths
// (connectors/s3).

// s3Options are the options of s3:// paths, for the file source and sink.
func s3Options() []Option {
	return []Option{
		{Name: "s3.endpoint", Type: String, Description: "for s3:// paths: URL of an S3-compatible server (http://127.0.0.1:7070); default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS S3"},
		{Name: "s3.region", Type: String, Description: "for s3:// paths: the region requests are signed for; default: $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1"},
		{Name: "s3.path-style", Type: Bool, Default: true, Description: "for s3:// paths: path-style addressing (http://host/bucket/key); false: virtual-hosted style (http://bucket.host/key)"},
		{Name: "s3.access-key", Type: String, Secret: true, Description: "for s3:// paths: the access key id (use ${VAR}); default: $AWS_ACCESS_KEY_ID"},
		{Name: "s3.secret-key", Type: String, Secret: true, Description: "for s3:// paths: the secret access key (use ${VAR}); default: $AWS_SECRET_ACCESS_KEY (and $AWS_SESSION_TOKEN)"},
		{Name: "s3.session-token", Type: String, Secret: true, Description: "for s3:// paths: the session token of temporary credentials (use ${VAR}); default: none with s3.access-key, else $AWS_SESSION_TOKEN"},
		{Name: "s3.part-size", Type: Int, Default: int64(s3.DefaultPartSize), Check: AtLeast(5 << 20),
			Description: "file sink on s3://: the part size of the multipart uploads, bytes (at least 5 MiB); a writer holds one part in memory per open file"},
	}
}

// s3Client makes the client of the s3.* options.
func s3Client(o Options) (*s3.Client, error) {
	opts := []s3.Option{s3.PathStyle(o.Bool("s3.path-style")), s3.PartSize(int(o.Int("s3.part-size")))}
	if o.Has("s3.endpoint") {
		opts = append(opts, s3.Endpoint(o.String("s3.endpoint")))
	}
	if o.Has("s3.region") {
		opts = append(opts, s3.Region(o.String("s3.region")))
	}
	if o.Has("s3.access-key") || o.Has("s3.secret-key") {
		if !o.Has("s3.access-key") || !o.Has("s3.secret-key") {
			return nil, optErr("s3.secret-key", "set both s3.access-key and s3.secret-key, or neither (then AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
		}
		opts = append(opts, s3.Credentials(o.String("s3.access-key"), o.String("s3.secret-key")))
	}
	if o.Has("s3.session-token") {
		opts = append(opts, s3.SessionToken(o.String("s3.session-token")))
	}
	c, err := s3.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("s3:// paths: %w", err)
	}
	return c, nil
}

// validateS3 checks the s3.* options against the paths (option paths of
// a source, path of a sink).
func validateS3(sink bool) func(Options) error {
	return func(o Options) error {
		var paths []string
		if sink {
			paths = []string{o.String("path")}
		} else {
			paths = o.Strings("paths")
		}
		n := 0
		for _, p := range paths {
			if s3.IsURL(p) {
				n++
				if _, _, err := s3.ParseURL(p); err != nil {
					return optErr(map[bool]string{true: "path", false: "paths"}[sink], "%v", err)
				}
			}
		}
		if n > 0 && n < len(paths) {
			return optErr("paths", "mixes s3:// URLs and local paths; use one source per storage")
		}
		if n == 0 {
			// Set by the user, even to its default: it would do nothing.
			for _, op := range s3Options() {
				if o.IsSet(op.Name) {
					return optErr(op.Name, "applies to s3:// paths only")
				}
			}
			return nil
		}
		if sink && o.Int("compact-below") > 0 {
			return optErr("compact-below", "is not supported on s3:// (objects cannot be renamed); leave it 0")
		}
		return nil
	}
}

// s3SinkOptions returns the sink's base directory (the key prefix for an
// s3:// path) and the options that put it on object storage.
func s3SinkOptions(o Options) (string, []file.SinkOption, error) {
	p := o.String("path")
	if !s3.IsURL(p) {
		return p, nil, nil
	}
	bucket, prefix, err := s3.ParseURL(p)
	if err != nil {
		return "", nil, optErr("path", "%v", err)
	}
	c, err := s3Client(o)
	if err != nil {
		return "", nil, err
	}
	return strings.Trim(prefix, "/"), []file.SinkOption{file.WithObjectStore(s3PartStore{Store: c.Store(bucket), fs: c.FS(), bucket: bucket})}, nil
}

// s3SourceOptions returns the option that reads the source's s3:// paths.
func s3SourceOptions(o Options) ([]file.SourceOption, error) {
	ps := o.Strings("paths")
	if len(ps) == 0 || !s3.IsURL(ps[0]) {
		return nil, nil
	}
	c, err := s3Client(o)
	if err != nil {
		return nil, err
	}
	return []file.SourceOption{file.WithSourceFS(c.FS())}, nil
}

// s3ReadsOutput is readsOutput for s3:// URLs: whether the source path
// (an object, a prefix or a glob) covers the sink's base prefix.
func s3ReadsOutput(src, base string) bool {
	if !s3.IsURL(src) || !s3.IsURL(base) {
		return false
	}
	if i := strings.IndexAny(src, "*?["); i >= 0 {
		src = src[:i]
		return strings.HasPrefix(strings.TrimSuffix(base, "/")+"/", src) || strings.HasPrefix(src, strings.TrimSuffix(base, "/")+"/")
	}
	src, base = strings.TrimSuffix(src, "/")+"/", strings.TrimSuffix(base, "/")+"/"
	return strings.HasPrefix(base, src)
}
