package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/sluice-io/sluice/connectors/file"
)

// maxListPages bounds every listing loop (1000 entries a page).
const maxListPages = 100000

// Store is a bucket as a file sink's object store
// (file.WithObjectStore): part files are written with multipart uploads
// whose completion is the commit.
type Store struct {
	c      *Client
	bucket string
}

var _ file.ObjectStore = (*Store)(nil)

// Store returns the bucket as an object store for the file sink.
func (c *Client) Store(bucket string) *Store { return &Store{c: c, bucket: bucket} }

// handle is a prepared upload: its id and parts, for Complete.
type handle struct {
	ID    string `json:"id"`
	Parts []part `json:"parts"`
}

type part struct {
	N    int32  `json:"n"`
	ETag string `json:"etag"`
}

func (s *Store) where(key string) string { return "s3://" + s.bucket + "/" + key }

// Create starts a multipart upload of key.
func (s *Store) Create(ctx context.Context, key string) (file.ObjectUpload, error) {
	out, err := s.c.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		return nil, fmt.Errorf("s3: start multipart upload of %s: %w", s.where(key), err)
	}
	id := aws.ToString(out.UploadId)
	if r, ok := retry.GetAttemptResults(out.ResultMetadata); ok && len(r.Results) > 1 {
		// An earlier attempt may have started an upload whose id was
		// lost with its response: abort every other upload of this key
		// (a part file's key is written by one writer only).
		if err := s.abortOthers(ctx, key, id); err != nil {
			_ = s.Abort(context.WithoutCancel(ctx), key, id)
			return nil, err
		}
	}
	return &upload{s: s, ctx: ctx, key: key, id: id}, nil
}

// abortOthers aborts the unfinished uploads of key other than keep.
func (s *Store) abortOthers(ctx context.Context, key, keep string) error {
	ups, err := s.Uploads(ctx, key)
	if err != nil {
		return fmt.Errorf("s3: start multipart upload of %s: after a retried start: %w", s.where(key), err)
	}
	for _, u := range ups {
		if u.Key == key && u.UploadID != keep {
			if err := s.Abort(ctx, key, u.UploadID); err != nil {
				return fmt.Errorf("s3: start multipart upload of %s: abort the upload of a lost response: %w", s.where(key), err)
			}
		}
	}
	return nil
}

// Complete completes a prepared upload. When S3 no longer knows the upload
// and the object exists, an earlier attempt completed it: nil. When
// neither exists: an error wrapping file.ErrUploadGone.
func (s *Store) Complete(ctx context.Context, key string, h []byte) error {
	var hd handle
	if err := json.Unmarshal(h, &hd); err != nil || hd.ID == "" {
		return fmt.Errorf("s3: complete %s: malformed upload handle %q: %v", s.where(key), h, err)
	}
	parts := make([]types.CompletedPart, len(hd.Parts))
	for i, p := range hd.Parts {
		parts[i] = types.CompletedPart{PartNumber: aws.Int32(p.N), ETag: aws.String(p.ETag)}
	}
	_, err := s.c.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key),
		UploadId: aws.String(hd.ID), MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return fmt.Errorf("s3: complete upload %s of %s: %w", hd.ID, s.where(key), err)
	}
	ok, herr := s.Exists(ctx, key)
	switch {
	case herr != nil:
		return fmt.Errorf("s3: complete upload %s of %s: %w (and looking for the object: %w)", hd.ID, s.where(key), err, herr)
	case ok:
		return nil
	}
	return fmt.Errorf("s3: complete upload %s of %s: %w: %w", hd.ID, s.where(key), file.ErrUploadGone, err)
}

// Uploads lists the unfinished multipart uploads under prefix.
func (s *Store) Uploads(ctx context.Context, prefix string) ([]file.PendingUpload, error) {
	var out []file.PendingUpload
	in := &s3.ListMultipartUploadsInput{Bucket: aws.String(s.bucket), Prefix: aws.String(prefix)}
	for range maxListPages {
		page, err := s.c.api.ListMultipartUploads(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("s3: list multipart uploads under %s: %w", s.where(prefix), err)
		}
		for _, u := range page.Uploads {
			out = append(out, file.PendingUpload{Key: aws.ToString(u.Key), UploadID: aws.ToString(u.UploadId), Initiated: aws.ToTime(u.Initiated)})
		}
		if !aws.ToBool(page.IsTruncated) {
			return out, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
	return nil, fmt.Errorf("s3: list multipart uploads under %s: more than %d pages", s.where(prefix), maxListPages)
}

// Abort aborts an upload; one already gone is no error.
func (s *Store) Abort(ctx context.Context, key, uploadID string) error {
	_, err := s.c.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.bucket), Key: aws.String(key), UploadId: aws.String(uploadID)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("s3: abort upload %s of %s: %w", uploadID, s.where(key), err)
	}
	return nil
}

// Exists reports whether the object key exists (HEAD).
func (s *Store) Exists(ctx context.Context, key string) (bool, error) {
	_, err := s.c.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("s3: head %s: %w", s.where(key), err)
}

// upload is a multipart upload in progress: it buffers one part and
// uploads it when full. The buffer comes from the client's pool at the
// first write and goes back when the upload is prepared or aborted,
// unless a part upload failed (the HTTP transport may still read a
// failed request's body).
type upload struct {
	s      *Store
	ctx    context.Context
	key    string
	id     string
	buf    []byte
	parts  []part
	done   bool
	failed bool // a part upload failed: buf is not recycled
}

func (u *upload) Write(p []byte) (int, error) {
	if u.done {
		return 0, fmt.Errorf("s3: write to %s after its upload was prepared or aborted", u.s.where(u.key))
	}
	if u.buf == nil && len(p) > 0 {
		u.buf = u.s.c.partBuf()
	}
	n := 0
	for len(p) > 0 {
		c := min(len(p), cap(u.buf)-len(u.buf))
		u.buf = append(u.buf, p[:c]...)
		p, n = p[c:], n+c
		if len(u.buf) == cap(u.buf) {
			if err := u.flush(u.ctx); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush uploads the buffer as the next part.
func (u *upload) flush(ctx context.Context) error {
	num := int32(len(u.parts) + 1)
	out, err := u.s.c.api.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(u.s.bucket), Key: aws.String(u.key), UploadId: aws.String(u.id),
		PartNumber: aws.Int32(num), Body: bytes.NewReader(u.buf), ContentLength: aws.Int64(int64(len(u.buf)))})
	if err != nil {
		u.failed = true
		return fmt.Errorf("s3: upload part %d of %s: %w", num, u.s.where(u.key), err)
	}
	u.parts = append(u.parts, part{N: num, ETag: strings.Clone(aws.ToString(out.ETag))})
	u.buf = u.buf[:0]
	return nil
}

// release gives the buffer back to the client's pool (or, after a failed
// part upload, to the garbage collector) and reports whether it went to
// the pool.
func (u *upload) release() (recycled bool) {
	recycled = u.buf != nil && !u.failed
	if recycled {
		u.s.c.recyclePart(u.buf)
	}
	u.buf = nil
	return recycled
}

// Prepare uploads the rest as the last part and returns the handle.
func (u *upload) Prepare(ctx context.Context) ([]byte, error) {
	if u.done {
		return nil, fmt.Errorf("s3: prepare %s twice", u.s.where(u.key))
	}
	if len(u.buf) > 0 || len(u.parts) == 0 {
		if err := u.flush(ctx); err != nil {
			return nil, err
		}
	}
	u.done = true
	u.release()
	return json.Marshal(handle{ID: u.id, Parts: u.parts})
}

// Abort aborts the upload.
func (u *upload) Abort(ctx context.Context) error {
	u.done = true
	u.release()
	return u.s.Abort(ctx, u.key, u.id)
}
