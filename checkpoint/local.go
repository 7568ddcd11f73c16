package checkpoint

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Local stores snapshots in a local directory, one subdirectory per
// snapshot (see the package documentation for the layout).
//
// A Local is safe for concurrent use. Save, Discard and Latest are
// serialized; List does not wait for them and never shows a snapshot that is
// still being written or already being removed. One Local should own a
// directory: two processes saving into the same directory would remove each
// other's in-progress checkpoints as garbage. Lock enforces that; the
// runtime takes it for the life of a job.
//
// Besides the snapshot directories a Local keeps three small files: _job
// (the owning job's id, see SetJobID), _lock (see Lock) and _latest (the
// newest completed checkpoint, see LatestCompleted).
type Local struct {
	dir    string
	retain int
	fs     fileSystem
	sem    chan struct{} // holds a token while Save, Discard or Latest runs

	lk    sync.Mutex // guards lockF and lockN
	lockF *os.File   // the flocked lock file while lockN > 0
	lockN int
}

var (
	_ Storage = (*Local)(nil)
	_ Storage = (*Memory)(nil)
)

// NewLocal returns a storage in dir, creating dir if needed. Options:
// Retain (default 3).
func NewLocal(dir string, opts ...Option) (*Local, error) {
	o := newOptions(opts)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint storage %q: %w", dir, err)
	}
	if err := mkdirAllDurable(o.fs, abs); err != nil {
		return nil, fmt.Errorf("checkpoint storage: %w", err)
	}
	return &Local{dir: abs, retain: o.retain, fs: o.fs, sem: make(chan struct{}, 1)}, nil
}

// Dir returns the storage directory (absolute).
func (l *Local) Dir() string { return l.dir }

func (l *Local) lock(ctx context.Context) error {
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Local) unlock() { <-l.sem }

// Save writes s to <dir>/chk-<id> (or <dir>/savepoint-<id> for a savepoint)
// atomically. Before writing it removes incomplete checkpoint directories
// left by earlier failed saves; after a checkpoint is saved it prunes
// checkpoints beyond the retained number (never the one just saved, never
// savepoints). Failures of that cleanup do not fail Save; they are reported
// in Info.Warning.
//
// Save does not modify s. It fails with an error wrapping ErrExists if a
// complete snapshot of the same kind and id exists. A failed Save leaves no
// _metadata behind, so the snapshot is not listed.
func (l *Local) Save(ctx context.Context, s *Snapshot) (Info, error) {
	if err := validate(s); err != nil {
		return Info{}, err
	}
	if err := l.lock(ctx); err != nil {
		return Info{}, fmt.Errorf("%s %d: save: %w", s.Kind, s.ID, err)
	}
	defer l.unlock()

	warnings := []error{l.collectGarbage(ctx)}
	snap := *s
	snap.Timestamp = normalizeTime(s.Timestamp)
	info, err := writeSnapshot(ctx, l.fs, l.dir, &snap)
	if err != nil {
		return Info{}, err
	}
	if snap.Kind == Checkpoint {
		// The snapshot is committed; cancellation no longer applies. The
		// record of the latest completed checkpoint comes first: if it
		// cannot be written the checkpoint still stands (failing Save now
		// would abort committables a restore would commit).
		warnings = append(warnings, l.setLatest(snap.ID))
		warnings = append(warnings, l.prune(context.WithoutCancel(ctx), snap.ID))
	}
	info.Warning = errors.Join(warnings...)
	return info, nil
}

// collectGarbage removes chk-* directories without _metadata, except the
// one recorded as the latest completed checkpoint (a damaged checkpoint is
// evidence, not garbage). Incomplete savepoint directories are left alone:
// they may belong to a SaveSavepoint running concurrently in another
// process.
func (l *Local) collectGarbage(ctx context.Context) error {
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("collect garbage: %w", err)
	}
	rec, recOK, _ := LatestCompleted(l.dir)
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			break
		}
		kind, id, ok := parseDirName(e.Name())
		if !ok || kind != Checkpoint || !e.IsDir() || recOK && id == rec {
			continue
		}
		path := filepath.Join(l.dir, e.Name())
		if _, err := os.Lstat(filepath.Join(path, metadataFileName)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := l.fs.RemoveAll(path); err != nil {
			errs = append(errs, fmt.Errorf("remove incomplete checkpoint: %w", err))
		}
	}
	return errors.Join(errs...)
}

// prune removes the oldest checkpoints beyond the retained number, keeping
// keepID in any case.
func (l *Local) prune(ctx context.Context, keepID int64) error {
	if l.retain <= 0 {
		return nil
	}
	infos, err := listDir(ctx, l.dir)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	var ids []int64
	for _, in := range infos {
		if in.Kind == Checkpoint && in.ID != keepID {
			ids = append(ids, in.ID)
		}
	}
	// keepID counts towards the retained number.
	excess := len(ids) + 1 - l.retain
	var errs []error
	for _, id := range ids[:max(excess, 0)] { // ids are sorted oldest first
		if err := discardDir(l.fs, filepath.Join(l.dir, dirName(Checkpoint, id))); err != nil {
			errs = append(errs, fmt.Errorf("retention: checkpoint %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Latest loads the newest completed checkpoint: the newest one listed in
// the directory or the one recorded as completed last (_latest), whichever
// is newer. It never falls back past a completed checkpoint: if that
// checkpoint cannot be loaded — a torn or corrupt state file, bad or
// deleted _metadata, a deleted directory — Latest fails with an error
// wrapping ErrDamaged (and ErrCorrupt or ErrNotFound) that names the
// checkpoint and what is wrong. Restoring an older checkpoint instead may
// duplicate output committed after it, so it is the caller's explicit
// choice (Get or Load it by id). Other errors (I/O, context) are returned
// as they are.
//
// Latest returns an error wrapping ErrNotFound (and not ErrDamaged) if
// there is no completed checkpoint.
func (l *Local) Latest(ctx context.Context) (*Snapshot, Info, error) {
	if err := l.lock(ctx); err != nil {
		return nil, Info{}, fmt.Errorf("latest checkpoint in %s: %w", l.dir, err)
	}
	defer l.unlock()
	return LoadLatest(ctx, l.dir)
}

// LoadLatest loads the newest completed checkpoint in dir, or fails, like
// Local.Latest.
func LoadLatest(ctx context.Context, dir string) (*Snapshot, Info, error) {
	id, ok, damaged, err := Newest(ctx, dir)
	if err != nil {
		return nil, Info{}, fmt.Errorf("latest checkpoint in %s: %w", dir, err)
	}
	if !ok {
		return nil, Info{}, fmt.Errorf("latest checkpoint in %s: %w", dir, ErrNotFound)
	}
	if damaged == nil {
		s, info, err := Load(ctx, filepath.Join(dir, dirName(Checkpoint, id)))
		if err == nil {
			return s, info, nil
		}
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrNotFound) {
			return nil, Info{}, fmt.Errorf("latest checkpoint: %w", err)
		}
		damaged = err
	}
	return nil, Info{}, &DamagedError{Dir: dir, ID: id, Err: damaged}
}

// DamagedError reports that the newest completed checkpoint in a directory
// cannot be loaded. It wraps ErrDamaged and the cause.
type DamagedError struct {
	Dir string // the checkpoint directory (absolute)
	ID  int64  // the damaged checkpoint
	Err error  // what is wrong, naming the file
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("the newest completed checkpoint in %s, checkpoint %d, is damaged: %v; "+
		"refusing to fall back to an older checkpoint on my own, because the output of checkpoint %d is already committed and an older one would write it again",
		e.Dir, e.ID, e.Err, e.ID)
}

func (e *DamagedError) Unwrap() []error { return []error{ErrDamaged, e.Err} }

// Get loads the snapshot of the given kind and id, verifying it like Load.
// It returns an error wrapping ErrNotFound if there is no such complete
// snapshot.
func (l *Local) Get(ctx context.Context, kind Kind, id int64) (*Snapshot, Info, error) {
	return Load(ctx, filepath.Join(l.dir, dirName(kind, id)))
}

// List lists the complete snapshots in the storage directory, checkpoints
// and savepoints, oldest first. See ListDir.
func (l *Local) List(ctx context.Context) ([]Info, error) {
	return listDir(ctx, l.dir)
}

// Discard removes the snapshot with the given id (the checkpoint, the
// savepoint, or both if both exist), complete or not. It returns an error
// wrapping ErrNotFound if there is none. The _metadata file is removed (and
// the removal made durable) first, so a crash midway leaves an incomplete
// directory, never a complete-looking one without its state.
func (l *Local) Discard(ctx context.Context, id int64) error {
	if err := l.lock(ctx); err != nil {
		return fmt.Errorf("discard snapshot %d: %w", id, err)
	}
	defer l.unlock()
	found := false
	var errs []error
	if rec, ok, _ := LatestCompleted(l.dir); ok && rec == id {
		// Discarding the latest completed checkpoint on purpose: the
		// record moves to the newest other one (or goes), first.
		if err := l.moveLatestBelow(ctx, id); err != nil {
			return fmt.Errorf("discard snapshot %d: %w", id, err)
		}
	}
	for _, k := range []Kind{Checkpoint, Savepoint} {
		path := filepath.Join(l.dir, dirName(k, id))
		if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
			continue
		}
		found = true
		if err := discardDir(l.fs, path); err != nil {
			errs = append(errs, fmt.Errorf("discard %s %d: %w", k, id, err))
		}
	}
	if !found {
		return fmt.Errorf("discard snapshot %d in %s: %w", id, l.dir, ErrNotFound)
	}
	return errors.Join(errs...)
}

// moveLatestBelow records the newest complete checkpoint older than id as
// the latest completed one, or removes the record if there is none.
func (l *Local) moveLatestBelow(ctx context.Context, id int64) error {
	infos, err := listDir(ctx, l.dir)
	if err != nil {
		return err
	}
	for _, in := range slices.Backward(infos) {
		if in.Kind == Checkpoint && in.ID < id {
			return l.setLatest(in.ID)
		}
	}
	if err := l.fs.Remove(filepath.Join(l.dir, latestFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.fs.SyncDir(l.dir)
}

// discardDir removes a snapshot directory, _metadata first.
func discardDir(fsys fileSystem, path string) error {
	if err := fsys.Remove(filepath.Join(path, metadataFileName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := fsys.SyncDir(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := fsys.RemoveAll(path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// SaveSavepoint writes s as a self-contained savepoint directory
// <dir>/savepoint-<id>, creating dir if needed, whatever s.Kind says. The
// directory can be moved elsewhere and still loads with Load. Savepoints are
// never pruned. An incomplete savepoint-<id> directory left by an earlier
// failed attempt is replaced; a complete one makes SaveSavepoint fail with an
// error wrapping ErrExists.
func SaveSavepoint(ctx context.Context, dir string, s *Snapshot) (Info, error) {
	return saveSavepoint(ctx, osFS{}, dir, s)
}

func saveSavepoint(ctx context.Context, fsys fileSystem, dir string, s *Snapshot) (Info, error) {
	if s == nil {
		return Info{}, validate(s)
	}
	snap := *s
	snap.Kind = Savepoint
	if err := validate(&snap); err != nil {
		return Info{}, err
	}
	snap.Timestamp = normalizeTime(s.Timestamp)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Info{}, fmt.Errorf("savepoint %d: %w", snap.ID, err)
	}
	if err := mkdirAllDurable(fsys, abs); err != nil {
		return Info{}, fmt.Errorf("savepoint %d: %w", snap.ID, err)
	}
	return writeSnapshot(ctx, fsys, abs, &snap)
}

// writeSnapshot writes s (already validated and normalized) into
// dir/<kind>-<id>: the state file, fsynced; _metadata.tmp, fsynced and
// renamed to _metadata; then the snapshot directory and dir are fsynced. On
// failure the snapshot directory is removed.
func writeSnapshot(ctx context.Context, fsys fileSystem, dir string, s *Snapshot) (info Info, err error) {
	target := filepath.Join(dir, dirName(s.Kind, s.ID))
	prefix := fmt.Sprintf("%s %d", s.Kind, s.ID)
	if err := ctx.Err(); err != nil {
		return Info{}, fmt.Errorf("%s: save %s: %w", prefix, target, err)
	}
	switch fi, err := os.Lstat(target); {
	case err == nil && fi.IsDir():
		if _, err := os.Lstat(filepath.Join(target, metadataFileName)); err == nil {
			return Info{}, fmt.Errorf("%s: save %s: %w", prefix, target, ErrExists)
		}
		// Incomplete: left by an earlier failed attempt.
		if err := fsys.RemoveAll(target); err != nil {
			return Info{}, fmt.Errorf("%s: remove incomplete directory: %w", prefix, err)
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	if err := fsys.Mkdir(target, dirPerm); err != nil {
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	defer func() {
		if err == nil {
			return
		}
		// _metadata first: whatever else fails to go, the snapshot must not
		// look complete.
		var cleanup []error
		if rerr := fsys.Remove(filepath.Join(target, metadataFileName)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			cleanup = append(cleanup, rerr)
		}
		if rerr := fsys.RemoveAll(target); rerr != nil {
			cleanup = append(cleanup, rerr)
		}
		if len(cleanup) > 0 {
			err = errors.Join(err, fmt.Errorf("%s: clean up after failed save: %w", prefix, errors.Join(cleanup...)))
		}
		info = Info{}
	}()

	m := metadata{
		FormatVersion: formatVersion,
		ID:            s.ID,
		Kind:          s.Kind,
		Job:           s.JobName,
		Timestamp:     s.Timestamp,
		StateFile:     stateFileName,
		Tasks:         len(s.Tasks),
	}
	statePath := filepath.Join(target, stateFileName)
	m.StateSize, m.StateCRC32C, err = writeStateFile(ctx, fsys, statePath, s)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return Info{}, fmt.Errorf("%s: write %s: %w", prefix, statePath, err)
		}
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	b, err := json.MarshalIndent(&m, "", "  ")
	if err != nil {
		return Info{}, fmt.Errorf("%s: encode metadata: %w", prefix, err)
	}
	tmp := filepath.Join(target, metadataTmpName)
	if err := writeFile(fsys, tmp, append(b, '\n')); err != nil {
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	// The commit point. No cancellation after this: it would only turn a
	// complete snapshot into a failed save.
	if err := fsys.Rename(tmp, filepath.Join(target, metadataFileName)); err != nil {
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	if err := fsys.SyncDir(target); err != nil {
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return Info{}, fmt.Errorf("%s: %w", prefix, err)
	}
	return m.info(target), nil
}

// writeStateFile creates path, writes s in the state format and fsyncs it.
// It returns the file's size and CRC-32C.
func writeStateFile(ctx context.Context, fsys fileSystem, path string, s *Snapshot) (size int64, crc uint32, err error) {
	f, err := fsys.CreateExcl(path)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	cw := &crcWriter{w: f}
	bw := bufio.NewWriterSize(cw, ioBufferSize)
	cnt := &countingWriter{w: bw}
	e := encoder{w: cnt}
	if err := e.snapshot(ctx, s); err != nil {
		return 0, 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, 0, err
	}
	return cnt.n, cw.crc, nil
}

// countingWriter counts the bytes written through it to a bufio.Writer.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func (c *countingWriter) WriteString(s string) (int, error) {
	n, err := c.w.WriteString(s)
	c.n += int64(n)
	return n, err
}

// writeFile creates path with content b and fsyncs it.
func writeFile(fsys fileSystem, path string, b []byte) (err error) {
	f, err := fsys.CreateExcl(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := f.Write(b); err != nil {
		return err
	}
	return f.Sync()
}

// Load loads the checkpoint or savepoint at path: a snapshot directory or
// its _metadata file. The directory may have been moved or renamed since it
// was written. Load verifies the format version, the state file's size and
// CRC-32C, and that the state agrees with _metadata; a failure wraps
// ErrCorrupt and names the file. A directory without _metadata (incomplete,
// or not a snapshot) yields an error wrapping ErrNotFound.
func Load(ctx context.Context, path string) (*Snapshot, Info, error) {
	dir, err := filepath.Abs(path)
	if err != nil {
		return nil, Info{}, fmt.Errorf("load snapshot %s: %w", path, err)
	}
	if filepath.Base(dir) == metadataFileName {
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			dir = filepath.Dir(dir)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, Info{}, fmt.Errorf("load snapshot %s: %w", dir, err)
	}
	// The errors below name the file they are about.
	m, err := readMetadata(dir)
	if err != nil {
		return nil, Info{}, fmt.Errorf("load snapshot: %w", err)
	}
	s, err := readState(ctx, filepath.Join(dir, m.StateFile), m)
	if err != nil {
		return nil, Info{}, fmt.Errorf("%s %d: %w", m.Kind, m.ID, err)
	}
	return s, m.info(dir), nil
}

// ListDir lists the complete snapshots in dir, checkpoints (chk-<id>) and
// savepoints (savepoint-<id>), oldest first: by ID, then checkpoints before
// savepoints. It reads only the _metadata files, so it is cheap, but it does
// not verify the state (Load does). Directories without _metadata are
// skipped. An entry whose _metadata cannot be read or does not match its
// directory name is listed with Info.Warning set (wrapping ErrCorrupt if it is
// malformed) and only ID, Kind and Path filled in.
func ListDir(ctx context.Context, dir string) ([]Info, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots in %s: %w", dir, err)
	}
	return listDir(ctx, abs)
}

func listDir(ctx context.Context, dir string) ([]Info, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var infos []Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list snapshots in %s: %w", dir, err)
		}
		kind, id, ok := parseDirName(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		m, err := readMetadata(path)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // incomplete, or removed since ReadDir
		case err != nil:
			infos = append(infos, Info{ID: id, Kind: kind, Path: path, Warning: fmt.Errorf("%s %d: %w", kind, id, err)})
		case m.ID != id || m.Kind != kind:
			infos = append(infos, Info{ID: id, Kind: kind, Path: path, Warning: fmt.Errorf("%s %d: %s: %w",
				kind, id, path, corruptf("metadata describes %s %d", m.Kind, m.ID))})
		default:
			infos = append(infos, m.info(path))
		}
	}
	slices.SortFunc(infos, func(a, b Info) int {
		return cmp.Or(cmp.Compare(a.ID, b.ID), cmp.Compare(a.Kind, b.Kind))
	})
	return infos, nil
}

func dirName(k Kind, id int64) string { return k.dirPrefix() + strconv.FormatInt(id, 10) }

// parseDirName parses "chk-<id>" and "savepoint-<id>", id in canonical
// decimal form.
func parseDirName(name string) (Kind, int64, bool) {
	for _, k := range []Kind{Checkpoint, Savepoint} {
		rest, ok := strings.CutPrefix(name, k.dirPrefix())
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || id < 0 || strconv.FormatInt(id, 10) != rest {
			return 0, 0, false
		}
		return k, id, true
	}
	return 0, 0, false
}
