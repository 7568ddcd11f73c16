package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/sluice-io/sluice/connectors/file"
)

// FS reads s3:// URLs for the file source (file.WithSourceFS): paths are
// s3://bucket/key URLs, listed with ListObjectsV2 and read with ranged
// GETs, so a split resumes at its byte offset.
type FS struct{ c *Client }

var _ file.SourceFS = FS{}

// FS returns the client as a file system of s3:// URLs for the file
// source.
func (c *Client) FS() FS { return FS{c} }

// List lists what pattern names: an object; every object under
// pattern+"/" (a directory); or, for a pattern with glob metacharacters
// (path.Match syntax, which never matches across '/'), every object whose
// key, or whose leading directories with as many elements as the
// pattern, match it.
func (f FS) List(ctx context.Context, pattern string) ([]file.FileStat, error) {
	bucket, key, err := ParseURL(pattern)
	if err != nil {
		return nil, err
	}
	if i := strings.IndexAny(key, "*?["); i >= 0 {
		if _, err := path.Match(key, ""); err != nil {
			return nil, fmt.Errorf("s3: glob %q: %w", pattern, err)
		}
		prefix := key[:i]
		depth := strings.Count(key, "/") + 1
		return f.list(ctx, bucket, prefix, func(k string) bool {
			el := strings.Split(k, "/")
			if len(el) < depth {
				return false
			}
			ok, _ := path.Match(key, strings.Join(el[:depth], "/"))
			return ok
		})
	}
	var out []file.FileStat
	if key != "" && !strings.HasSuffix(key, "/") {
		h, err := f.c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		switch {
		case err == nil:
			return []file.FileStat{{Path: pattern, Size: aws.ToInt64(h.ContentLength), ModTime: aws.ToTime(h.LastModified)}}, nil
		case !isNotFound(err):
			return nil, fmt.Errorf("s3: head %s: %w", pattern, err)
		}
		key += "/"
	}
	out, err = f.list(ctx, bucket, key, func(string) bool { return true })
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("s3: %s: no object and no objects under it: %w", pattern, fs.ErrNotExist)
	}
	return out, nil
}

func (f FS) list(ctx context.Context, bucket, prefix string, keep func(string) bool) ([]file.FileStat, error) {
	var out []file.FileStat
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	for range maxListPages {
		page, err := f.c.api.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("s3: list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, "/") || !keep(k) {
				continue // directory markers
			}
			out = append(out, file.FileStat{Path: "s3://" + bucket + "/" + k, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	return nil, fmt.Errorf("s3: list s3://%s/%s: more than %d pages", bucket, prefix, maxListPages)
}

// Open opens an object for reading (a HEAD for its size; reads are GETs
// from the read position to the end, ranged GETs for ReadAt).
func (f FS) Open(ctx context.Context, u string) (file.SourceFile, error) {
	bucket, key, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	h, err := f.c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("s3: open %s: %w", u, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("s3: open %s: %w", u, err)
	}
	return &object{c: f.c, ctx: ctx, url: u, bucket: bucket, key: key, size: aws.ToInt64(h.ContentLength),
		mtime: aws.ToTime(h.LastModified), etag: aws.ToString(h.ETag)}, nil
}

// object is an open object. Its reads use the context it was opened with.
type object struct {
	c           *Client
	ctx         context.Context
	url         string
	bucket, key string
	size        int64
	mtime       time.Time
	etag        string
	pos         int64
	body        io.ReadCloser // a GET from pos, or nil
}

func (o *object) get(off, end int64) (io.ReadCloser, error) {
	rng := fmt.Sprintf("bytes=%d-", off)
	if end >= 0 {
		rng = fmt.Sprintf("bytes=%d-%d", off, end)
	}
	in := &s3.GetObjectInput{Bucket: aws.String(o.bucket), Key: aws.String(o.key), Range: aws.String(rng)}
	if o.etag != "" {
		in.IfMatch = aws.String(o.etag) // the object changed: fail rather than mix two versions
	}
	out, err := o.c.api.GetObject(o.ctx, in)
	if err != nil {
		return nil, fmt.Errorf("s3: read %s at %d: %w", o.url, off, err)
	}
	return out.Body, nil
}

func (o *object) Read(p []byte) (int, error) {
	if o.pos >= o.size {
		return 0, io.EOF
	}
	if o.body == nil {
		b, err := o.get(o.pos, -1)
		if err != nil {
			return 0, err
		}
		o.body = b
	}
	n, err := o.body.Read(p)
	o.pos += int64(n)
	if errors.Is(err, io.EOF) && o.pos < o.size {
		err = fmt.Errorf("s3: read %s: the response ended at %d of %d bytes: %w", o.url, o.pos, o.size, io.ErrUnexpectedEOF)
	}
	return n, err
}

func (o *object) Seek(offset int64, whence int) (int64, error) {
	var to int64
	switch whence {
	case io.SeekStart:
		to = offset
	case io.SeekCurrent:
		to = o.pos + offset
	case io.SeekEnd:
		to = o.size + offset
	default:
		return o.pos, fmt.Errorf("s3: seek %s: bad whence %d", o.url, whence)
	}
	if to < 0 {
		return o.pos, fmt.Errorf("s3: seek %s to %d: negative position", o.url, to)
	}
	if to != o.pos && o.body != nil {
		o.body.Close()
		o.body = nil
	}
	o.pos = to
	return to, nil
}

func (o *object) ReadAt(p []byte, off int64) (int, error) {
	if off >= o.size {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(p)), o.size) - 1
	b, err := o.get(off, end)
	if err != nil {
		return 0, err
	}
	defer b.Close()
	n, err := io.ReadFull(b, p[:end-off+1])
	if err != nil {
		return n, fmt.Errorf("s3: read %s at %d: %w", o.url, off, err)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (o *object) Close() error {
	if o.body != nil {
		err := o.body.Close()
		o.body = nil
		return err
	}
	return nil
}

func (o *object) Stat() (fs.FileInfo, error) { return objectInfo{o}, nil }

type objectInfo struct{ o *object }

func (i objectInfo) Name() string       { return path.Base(i.o.key) }
func (i objectInfo) Size() int64        { return i.o.size }
func (i objectInfo) Mode() fs.FileMode  { return 0o444 }
func (i objectInfo) ModTime() time.Time { return i.o.mtime }
func (i objectInfo) IsDir() bool        { return false }
func (i objectInfo) Sys() any           { return nil }
