package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/sluice-io/sluice/checkpoint"
)

// CheckpointStorage is a checkpoint.Storage on object storage, so that a
// job's state survives the loss of its machine. Under s3://bucket/prefix
// it keeps the layout of checkpoint.Local:
//
//	chk-<id>/state         the state file (checkpoint's binary format)
//	chk-<id>/_metadata     its metadata (JSON); written last, with If-None-Match: *
//	savepoint-<id>/…       savepoints, the same way
//	_latest                the id of the newest completed checkpoint
//	_job                   the job's id (written once, If-None-Match: *)
//
// The conditional PUT of _metadata is the atomic publish: a snapshot
// without _metadata is incomplete and never listed or loaded, and a
// second writer of the same snapshot gets checkpoint.ErrExists. Latest
// loads the newest completed checkpoint — the newer of _latest and the
// newest complete chk-<id> listed — and fails with a
// *checkpoint.DamagedError if it cannot be loaded, never falling back to
// an older one. Retention deletes _metadata first. Lock takes the
// prefix's lock object (_lock; see [CheckpointStorage.Lock]), so two
// processes never write checkpoints under one prefix.
type CheckpointStorage struct {
	c      *Client
	bucket string
	prefix string // "" or ending in '/'
	retain int
	mu     sync.Mutex

	ttl    time.Duration
	onLost func(error)
	noLock bool
	ls     lockState
}

var _ checkpoint.Storage = (*CheckpointStorage)(nil)

// CheckpointStorage returns the checkpoint storage under the s3:// URL u,
// keeping the newest retain checkpoints (<= 0: all; the CLI passes
// checkpoint.retain, default checkpoint.DefaultRetain).
func (c *Client) CheckpointStorage(u string, retain int, opts ...CheckpointOption) (*CheckpointStorage, error) {
	bucket, key, err := ParseURL(u)
	if err != nil {
		return nil, err
	}
	key = strings.Trim(key, "/")
	if key != "" {
		key += "/"
	}
	s := &CheckpointStorage{c: c, bucket: bucket, prefix: key, retain: retain, ttl: DefaultLockTTL}
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	return s, nil
}

// URL is the storage's s3:// URL.
func (s *CheckpointStorage) URL() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.prefix, "/")
}

func (s *CheckpointStorage) url(key string) string { return "s3://" + s.bucket + "/" + key }

func (s *CheckpointStorage) get(ctx context.Context, key string) ([]byte, error) {
	out, err := s.c.api.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("read %s: %w", s.url(key), checkpoint.ErrNotFound)
		}
		return nil, fmt.Errorf("read %s: %w", s.url(key), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, 1<<40))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.url(key), err)
	}
	return b, nil
}

// put writes an object; with ifNoneMatch it fails with
// checkpoint.ErrExists if the object exists.
func (s *CheckpointStorage) put(ctx context.Context, key string, b []byte, ifNoneMatch bool) error {
	in := &s3.PutObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key), Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))}
	if ifNoneMatch {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := s.c.api.PutObject(ctx, in)
	if err != nil {
		if ifNoneMatch && isCode(err, "PreconditionFailed", "ConditionalRequestConflict") {
			return fmt.Errorf("write %s: %w", s.url(key), checkpoint.ErrExists)
		}
		return fmt.Errorf("write %s: %w", s.url(key), err)
	}
	return nil
}

func (s *CheckpointStorage) del(ctx context.Context, key string) error {
	_, err := s.c.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.bucket), Key: aws.String(key)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("delete %s: %w", s.url(key), err)
	}
	return nil
}

// Save writes the state, then publishes _metadata with a conditional PUT;
// for a checkpoint it then records _latest and applies retention
// (failures of those two are in Info.Warning).
func (s *CheckpointStorage) Save(ctx context.Context, snap *checkpoint.Snapshot) (checkpoint.Info, error) {
	if snap == nil {
		return checkpoint.Info{}, errors.New("checkpoint: save: nil snapshot")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.prefix + checkpoint.Name(snap.Kind, snap.ID)
	var buf bytes.Buffer
	meta, info, err := checkpoint.Encode(ctx, &buf, snap, s.url(dir))
	if err != nil {
		return checkpoint.Info{}, err
	}
	where := fmt.Sprintf("%s %d", snap.Kind, snap.ID)
	if _, err := s.get(ctx, dir+"/"+checkpoint.MetadataName); err == nil {
		return checkpoint.Info{}, fmt.Errorf("%s: save %s: %w", where, s.url(dir), checkpoint.ErrExists)
	}
	if err := s.checkLock(ctx); err != nil {
		return checkpoint.Info{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := s.put(ctx, dir+"/"+checkpoint.StateName, buf.Bytes(), false); err != nil {
		return checkpoint.Info{}, fmt.Errorf("%s: %w", where, err)
	}
	// The commit point, once more only while the lock is ours.
	if err := s.checkLock(ctx); err != nil {
		return checkpoint.Info{}, fmt.Errorf("%s: %w", where, err)
	}
	if err := s.put(ctx, dir+"/"+checkpoint.MetadataName, meta, true); err != nil {
		return checkpoint.Info{}, fmt.Errorf("%s: %w", where, err)
	}
	if snap.Kind == checkpoint.Checkpoint {
		ctx := context.WithoutCancel(ctx)
		var warnings []error
		if err := s.put(ctx, s.prefix+"_latest", []byte(strconv.FormatInt(snap.ID, 10)+"\n"), false); err != nil {
			warnings = append(warnings, err)
		}
		warnings = append(warnings, s.prune(ctx, snap.ID))
		info.Warning = errors.Join(warnings...)
	}
	return info, nil
}

// prune removes the checkpoints older than the newest s.retain.
func (s *CheckpointStorage) prune(ctx context.Context, keep int64) error {
	if s.retain <= 0 {
		return nil
	}
	infos, err := s.List(ctx)
	if err != nil {
		return err
	}
	var ids []int64
	for _, in := range infos {
		if in.Kind == checkpoint.Checkpoint && in.ID != keep {
			ids = append(ids, in.ID)
		}
	}
	var errs []error
	for len(ids) > s.retain-1 {
		errs = append(errs, s.remove(ctx, checkpoint.Checkpoint, ids[0]))
		ids = ids[1:]
	}
	return errors.Join(errs...)
}

// remove deletes a snapshot, _metadata first.
func (s *CheckpointStorage) remove(ctx context.Context, k checkpoint.Kind, id int64) error {
	dir := s.prefix + checkpoint.Name(k, id) + "/"
	if err := s.del(ctx, dir+checkpoint.MetadataName); err != nil {
		return err
	}
	return s.del(ctx, dir+checkpoint.StateName)
}

// latestRecorded reads _latest.
func (s *CheckpointStorage) latestRecorded(ctx context.Context) (int64, bool, error) {
	b, err := s.get(ctx, s.prefix+"_latest")
	if errors.Is(err, checkpoint.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	id, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w: %q is not a checkpoint id", s.url(s.prefix+"_latest"), checkpoint.ErrCorrupt, b)
	}
	return id, true, nil
}

// Newest returns the newest completed checkpoint id: the newer of _latest
// and the newest complete chk-<id>.
func (s *CheckpointStorage) Newest(ctx context.Context) (int64, bool, error) {
	id, ok, err := s.latestRecorded(ctx)
	if err != nil {
		return 0, false, err
	}
	infos, err := s.List(ctx)
	if err != nil {
		return 0, false, err
	}
	for _, in := range infos {
		if in.Kind == checkpoint.Checkpoint && in.Warning == nil && (!ok || in.ID > id) {
			id, ok = in.ID, true
		}
	}
	return id, ok, nil
}

// Latest loads the newest completed checkpoint; see the type's
// documentation.
func (s *CheckpointStorage) Latest(ctx context.Context) (*checkpoint.Snapshot, checkpoint.Info, error) {
	id, ok, err := s.Newest(ctx)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	if !ok {
		return nil, checkpoint.Info{}, fmt.Errorf("no completed checkpoint in %s: %w", s.URL(), checkpoint.ErrNotFound)
	}
	snap, info, err := s.Get(ctx, checkpoint.Checkpoint, id)
	if err != nil {
		return nil, checkpoint.Info{}, &checkpoint.DamagedError{Dir: s.URL(), ID: id, Err: err}
	}
	return snap, info, nil
}

// Get loads one snapshot.
func (s *CheckpointStorage) Get(ctx context.Context, k checkpoint.Kind, id int64) (*checkpoint.Snapshot, checkpoint.Info, error) {
	dir := s.prefix + checkpoint.Name(k, id)
	meta, err := s.get(ctx, dir+"/"+checkpoint.MetadataName)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	_, stateFile, size, err := checkpoint.DecodeInfo(meta, s.url(dir))
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	state, err := s.get(ctx, dir+"/"+stateFile)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return nil, checkpoint.Info{}, fmt.Errorf("%w: state file missing: %w", checkpoint.ErrCorrupt, err)
	}
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	if int64(len(state)) != size {
		return nil, checkpoint.Info{}, fmt.Errorf("read %s: %w: size is %d bytes, metadata says %d", s.url(dir+"/"+stateFile), checkpoint.ErrCorrupt, len(state), size)
	}
	return checkpoint.Decode(ctx, meta, bytes.NewReader(state), s.url(dir))
}

// List lists the complete snapshots, oldest first (checkpoints before
// savepoints of the same id). An entry whose _metadata cannot be parsed is
// listed with Warning set.
func (s *CheckpointStorage) List(ctx context.Context) ([]checkpoint.Info, error) {
	var dirs []string
	in := &s3.ListObjectsV2Input{Bucket: aws.String(s.bucket), Prefix: aws.String(s.prefix), Delimiter: aws.String("/")}
	for range maxListPages {
		page, err := s.c.api.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list snapshots in %s: %w", s.URL(), err)
		}
		for _, p := range page.CommonPrefixes {
			dirs = append(dirs, strings.TrimSuffix(strings.TrimPrefix(aws.ToString(p.Prefix), s.prefix), "/"))
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	var out []checkpoint.Info
	for _, d := range dirs {
		k, id, ok := checkpoint.ParseName(d)
		if !ok {
			continue
		}
		meta, err := s.get(ctx, s.prefix+d+"/"+checkpoint.MetadataName)
		if errors.Is(err, checkpoint.ErrNotFound) {
			continue // incomplete
		}
		info := checkpoint.Info{ID: id, Kind: k, Path: s.url(s.prefix + d)}
		if err != nil {
			info.Warning = err
		} else if got, _, _, err := checkpoint.DecodeInfo(meta, info.Path); err != nil {
			info.Warning = err
		} else if got.ID != id || got.Kind != k {
			info.Warning = fmt.Errorf("%s: %w: metadata is of %s %d", info.Path, checkpoint.ErrCorrupt, got.Kind, got.ID)
		} else {
			info = got
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b checkpoint.Info) int {
		if a.ID != b.ID {
			return int(min(max(a.ID-b.ID, -1), 1))
		}
		return int(a.Kind) - int(b.Kind)
	})
	return out, nil
}

// Discard removes a checkpoint; _latest moves to the next older one if it
// named it.
func (s *CheckpointStorage) Discard(ctx context.Context, id int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.get(ctx, s.prefix+checkpoint.Name(checkpoint.Checkpoint, id)+"/"+checkpoint.MetadataName); err != nil {
		return fmt.Errorf("checkpoint %d: discard: %w", id, err)
	}
	if err := s.remove(ctx, checkpoint.Checkpoint, id); err != nil {
		return fmt.Errorf("checkpoint %d: discard: %w", id, err)
	}
	if latest, ok, err := s.latestRecorded(ctx); err == nil && ok && latest == id {
		infos, err := s.List(ctx)
		if err != nil {
			return err
		}
		older := int64(-1)
		for _, in := range infos {
			if in.Kind == checkpoint.Checkpoint && in.ID < id {
				older = in.ID
			}
		}
		if older < 0 {
			return s.del(ctx, s.prefix+"_latest")
		}
		return s.put(ctx, s.prefix+"_latest", []byte(strconv.FormatInt(older, 10)+"\n"), false)
	}
	return nil
}

// JobID returns the job id recorded in _job, or "".
func (s *CheckpointStorage) JobID() (string, error) {
	b, err := s.get(context.Background(), s.prefix+"_job")
	if errors.Is(err, checkpoint.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// SetJobID records the job id in _job (a conditional PUT); it fails if
// another id is recorded.
func (s *CheckpointStorage) SetJobID(id string) error {
	err := s.put(context.Background(), s.prefix+"_job", []byte(id+"\n"), true)
	if errors.Is(err, checkpoint.ErrExists) {
		got, gerr := s.JobID()
		if gerr != nil {
			return gerr
		}
		if got != id {
			return fmt.Errorf("%s holds checkpoints of job %s, not %s", s.URL(), got, id)
		}
		return nil
	}
	return err
}

// Load loads what an s3:// URL names: a snapshot (…/chk-<id>,
// …/savepoint-<id>, or its _metadata) or a storage's newest snapshot —
// its newest completed checkpoint, or a savepoint newer than that. It
// never falls back past a damaged newest checkpoint.
func (c *Client) Load(ctx context.Context, u string) (*checkpoint.Snapshot, checkpoint.Info, error) {
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"+checkpoint.MetadataName), "/")
	if k, id, ok := checkpoint.ParseName(path.Base(u)); ok {
		st, err := c.CheckpointStorage(u[:len(u)-len(path.Base(u))], 0)
		if err != nil {
			return nil, checkpoint.Info{}, err
		}
		return st.Get(ctx, k, id)
	}
	st, err := c.CheckpointStorage(u, 0)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	infos, err := st.List(ctx)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	newest, ok, err := st.Newest(ctx)
	if err != nil {
		return nil, checkpoint.Info{}, err
	}
	for i := len(infos) - 1; i >= 0; i-- {
		if in := infos[i]; in.Kind == checkpoint.Savepoint && (!ok || in.ID > newest) {
			return st.Get(ctx, checkpoint.Savepoint, in.ID)
		}
	}
	return st.Latest(ctx)
}
