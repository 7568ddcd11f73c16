package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/sluice-io/sluice/sink/leftover"
)

// partDest is where one writer's part files go: the seam between the
// sink's one writer (writer.go) and its storage. localDest writes hidden
// in-progress files that the committer renames; objectDest writes
// multipart uploads that the committer completes.
type partDest interface {
	// recover removes what aborted attempts of this job left behind (see
	// writer.removeStrays) and returns the lowest counter above every
	// part file of this subtask's name that stays.
	recover(ctx context.Context, r strayRequest) (next int64, err error)
	// create starts the part file final in the bucket directory dir. It
	// returns an error wrapping errNameTaken if that name is in use.
	create(ctx context.Context, dir, final string) (partOut, error)
	// resume continues an open part file of a restored state from its
	// checkpointed length; a local file in a copy named with the
	// resuming writer's tag (resumedName), so that a stale writer still
	// holding the restored file cannot write into the continued one.
	resume(ctx context.Context, ip inProgressFile, tag string) (partOut, error)
	// keepsOpen reports whether a row-format part file may stay open
	// across a checkpoint (it cannot on an object store: an upload is not
	// resumable from a checkpoint).
	keepsOpen() bool
	// checkpoint makes durable what a checkpoint needs besides the part
	// files (the local directories' new entries).
	checkpoint(ctx context.Context) error
	close() error
}

// partOut is one open part file of a partDest.
type partOut interface {
	io.Writer
	// name is the file's path or key, for messages.
	name() string
	// temp is the hidden in-progress name ("" on an object store).
	temp() string
	// sync makes what was written durable (a part file kept open across a
	// checkpoint).
	sync() error
	// finish ends the file for its commit and returns the committable's
	// destination fields (Temp or Upload). It releases the file also when
	// it fails.
	finish(ctx context.Context) (committable, error)
	// abandon releases the file without committing it: a local file stays
	// in progress (for a restore to resume or remove), an upload is
	// aborted.
	abandon(ctx context.Context) error
}

// errNameTaken is returned by partDest.create for a name in use.
var errNameTaken = errors.New("part file name in use")

// strayRequest is what partDest.recover needs to know of the writer.
type strayRequest struct {
	names    partNames
	sub, par int
	attempt  int
	live     *liveWriters
	states   []writerState
	restored bool
}

// leftoverState is the leftover.State of a restored writer state: files at
// or above its NextCounter are strays, unless writer st.Subtask is open in
// another attempt (a region restarted alone, see liveWriters).
func (r strayRequest) leftoverState(st writerState) leftover.State {
	ls := leftover.State{Subtask: st.Subtask, From: st.NextCounter}
	if st.Subtask != r.sub && r.live.elsewhere(r.names.job, st.Subtask, r.attempt) {
		ls.From = math.MaxInt64
	}
	return ls
}

// nextAbove returns the lowest counter above every name of this subtask in
// existing that is not removed.
func (r strayRequest) nextAbove(p baseParser, existing []string, removed map[string]bool) int64 {
	var next int64
	for _, k := range existing {
		if sub, c, ok := p.Parse(k); ok && sub == r.sub && !removed[k] {
			next = max(next, c+1)
		}
	}
	return next
}

// localDest writes part files under the sink's base directory.
type localDest struct {
	root      *os.Root
	dir       string // the base directory, for messages
	fileMode  fs.FileMode
	dirMode   fs.FileMode
	made      map[string]bool // bucket directories known to exist
	dirtyDirs map[string]bool // directories with new entries, fsynced at the checkpoint
}

func (s *fileSink[T]) newLocalDest() (*localDest, error) {
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	return &localDest{root: root, dir: s.dir, fileMode: s.cfg.fileMode, dirMode: s.cfg.dirMode(),
		made: map[string]bool{}, dirtyDirs: map[string]bool{}}, nil
}

// recover removes the hidden part files that aborted attempts of this job
// left behind, by the rule of package sink/leftover (the names' sequence
// numbers are the part file counters):
//
//   - nothing restored (a restart, or a new start of the same job after a
//     crash, before the first completed checkpoint): every in-progress
//     file of a subtask j with j % parallelism == this subtask;
//   - restored: for each restored state that reached this writer, the
//     files of that state's subtask j whose counter is at or above its
//     NextCounter and that no state of this writer lists as open or held.
//     The runtime hands each state to exactly one writer and builds every
//     writer of an attempt before any writes, so this holds also when j
//     runs again as another writer (a scale-down whose states went
//     round-robin) — but not while writer j is open in another attempt (a
//     region restarted alone, see liveWriters). Subtasks with no restored
//     state are left alone: a writer resumes the open files of the states
//     it got under their old names, so a file named after a subtask
//     beyond the restored parallelism may still be open in another
//     writer's state.
//
// Files of checkpoints that completed are kept: their counters are below
// NextCounter, which stays above every hidden file of the subtask's name
// that survives a start (the returned counter). Files of other jobs
// (another job id in the name) are never touched; files named before job
// ids count as this job's only where a restored state of this job uses
// such names. Both namings are looked at for an old state, since files
// written after a restore from it carry the job id.
func (d *localDest) recover(_ context.Context, r strayRequest) (int64, error) {
	var needed []string
	byJob := map[string][]leftover.State{r.names.job: nil}
	if r.restored {
		for _, st := range r.states {
			ls := r.leftoverState(st)
			byJob[r.names.job] = append(byJob[r.names.job], ls)
			if st.JobID != r.names.job {
				byJob[st.JobID] = append(byJob[st.JobID], ls)
			}
			for _, ip := range st.InProgress {
				bd, _ := bucketDir(ip.Bucket)
				needed = append(needed, path.Join(bd, ip.Temp))
			}
			for _, h := range st.Held {
				bd, _ := bucketDir(h.Bucket)
				needed = append(needed, path.Join(bd, h.Temp))
			}
		}
	}
	var existing []string
	pre := "." + r.names.prefix + "-"
	err := fs.WalkDir(d.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !e.IsDir() && strings.HasPrefix(e.Name(), pre) && strings.HasSuffix(e.Name(), ".inprogress") {
			existing = append(existing, p)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("file sink: look for stray in-progress files under %s: %w", d.dir, err)
	}
	var strays []string
	for _, job := range slices.Sorted(maps.Keys(byJob)) {
		got, err := leftover.Abort(leftover.Request{Parser: baseParser{r.names.strayScheme(job)},
			Subtask: r.sub, Parallelism: r.par, Restored: r.restored, States: byJob[job],
			Existing: existing, Needed: needed})
		if err != nil {
			return 0, fmt.Errorf("file sink: stray in-progress files: %w", err)
		}
		strays = append(strays, got...)
	}
	strays = append(strays, d.superseded(r, existing, strays)...)
	removed := make(map[string]bool, len(strays))
	for _, p := range strays {
		if err := d.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("file sink: remove stray in-progress file %s: %w", path.Join(d.dir, p), err)
		}
		removed[p] = true
	}
	// Number new files above every hidden file of this subtask's name
	// that stays: after a rescale another writer may hold one (resumed
	// from this subtask's old state, or prepared and not yet committed),
	// and a NextCounter below it would make a later restore remove it as
	// a stray. (Probing for a free name is not enough: finished files
	// that a consumer took away leave gaps below it.)
	return r.nextAbove(baseParser{r.names.strayScheme(r.names.job)}, existing, removed), nil
}

// superseded returns this job's hidden files that no restore can need
// any more, besides the strays found already: another copy of a part file
// that a restored state lists as open under a different hidden name (a
// restored file that was resumed by copying it, or a copy made by an
// attempt that failed before its next checkpoint), and any hidden file of
// a part file that is committed already (its final name exists).
func (d *localDest) superseded(r strayRequest, existing, strays []string) []string {
	if !r.restored {
		return nil
	}
	needed := map[string]string{} // dir/final -> dir/hidden name a state lists
	for _, st := range r.states {
		for _, ip := range st.InProgress {
			bd, _ := bucketDir(ip.Bucket)
			needed[path.Join(bd, ip.Final)] = path.Join(bd, ip.Temp)
		}
		for _, h := range st.Held {
			bd, _ := bucketDir(h.Bucket)
			needed[path.Join(bd, h.Final)] = path.Join(bd, h.Temp)
		}
	}
	gone := make(map[string]bool, len(strays))
	for _, p := range strays {
		gone[p] = true
	}
	own := baseParser{r.names.strayScheme(r.names.job)}
	var out []string
	for _, p := range existing {
		if gone[p] {
			continue
		}
		if _, _, ok := own.Parse(p); !ok {
			continue
		}
		final := finalOf(path.Base(p))
		if final == "" {
			continue
		}
		f := path.Join(path.Dir(p), final)
		if want, ok := needed[f]; ok {
			if want != p {
				out = append(out, p)
			}
			continue
		}
		if d.exists(f) {
			out = append(out, p)
		}
	}
	return out
}

func (d *localDest) exists(name string) bool {
	_, err := d.root.Lstat(name)
	return err == nil
}

func (d *localDest) create(_ context.Context, dir, final string) (partOut, error) {
	if dir != "." && !d.made[dir] {
		if !d.exists(dir) {
			if err := d.root.MkdirAll(dir, d.dirMode); err != nil {
				return nil, fmt.Errorf("create directory %s: %w", path.Join(d.dir, dir), err)
			}
			// The new directories' entries become durable with their
			// parents' fsync at the checkpoint.
			for p := path.Dir(dir); ; p = path.Dir(p) {
				d.dirtyDirs[p] = true
				if p == "." {
					break
				}
			}
		}
		d.made[dir] = true
	}
	temp := inProgress(final)
	if d.exists(path.Join(dir, final)) || d.exists(path.Join(dir, temp)) {
		return nil, errNameTaken
	}
	name := path.Join(dir, temp)
	f, err := d.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, d.fileMode)
	if errors.Is(err, fs.ErrExist) {
		return nil, errNameTaken
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path.Join(d.dir, name), err)
	}
	d.dirtyDirs[dir] = true
	return &localPart{f: f, path: path.Join(d.dir, name), tmp: temp}, nil
}

// resume copies the checkpointed ip.Size bytes of the restored file into
// a new hidden file named with tag and continues there. The restored file
// is left as it is (a stale writer may still append to it; another
// restore of the same checkpoint copies from it again); a restore of a
// later checkpoint removes it (recover).
func (d *localDest) resume(_ context.Context, ip inProgressFile, tag string) (partOut, error) {
	dir, err := bucketDir(ip.Bucket)
	if err != nil {
		return nil, err
	}
	name := path.Join(dir, ip.Temp)
	full := path.Join(d.dir, name)
	src, err := d.root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("file sink: resume in-progress file %s: %w", full, err)
	}
	defer src.Close()
	temp := resumedName(ip.Final, tag)
	cname := path.Join(dir, temp)
	cfull := path.Join(d.dir, cname)
	f, err := d.root.OpenFile(cname, os.O_WRONLY|os.O_CREATE|os.O_EXCL, d.fileMode)
	if err != nil {
		return nil, fmt.Errorf("file sink: resume in-progress file %s: create %s: %w", full, cfull, err)
	}
	n, err := io.Copy(f, io.LimitReader(src, ip.Size))
	if err == nil && n < ip.Size {
		err = fmt.Errorf("it holds %d bytes, the checkpoint %d: %w", n, ip.Size, io.ErrUnexpectedEOF)
	}
	if err != nil {
		f.Close()
		_ = d.root.Remove(cname)
		return nil, fmt.Errorf("file sink: resume in-progress file %s into %s: %w", full, cfull, err)
	}
	d.dirtyDirs[dir] = true
	return &localPart{f: f, path: cfull, tmp: temp}, nil
}

func (d *localDest) keepsOpen() bool { return true }

func (d *localDest) checkpoint(context.Context) error {
	for _, dir := range slices.Sorted(maps.Keys(d.dirtyDirs)) {
		if err := syncDir(d.root, dir); err != nil {
			return fmt.Errorf("file sink: fsync directory %s: %w", path.Join(d.dir, dir), err)
		}
		delete(d.dirtyDirs, dir)
	}
	clear(d.made) // bounded by the buckets of one checkpoint interval
	return nil
}

func (d *localDest) close() error { return d.root.Close() }

// localPart is a hidden in-progress file.
type localPart struct {
	f    *os.File
	path string // the base directory joined with the file's name
	tmp  string
}

func (p *localPart) Write(b []byte) (int, error) { return p.f.Write(b) }
func (p *localPart) name() string                { return p.path }
func (p *localPart) temp() string                { return p.tmp }

func (p *localPart) sync() error {
	if err := p.f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	return nil
}

func (p *localPart) finish(context.Context) (committable, error) {
	err := p.sync()
	if cerr := p.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close: %w", cerr)
	}
	return committable{Temp: p.tmp}, err
}

func (p *localPart) abandon(context.Context) error { return p.f.Close() }

// objectDest writes part files as multipart uploads to an ObjectStore.
type objectDest struct {
	store  ObjectStore
	prefix string // the sink's directory
	// ctx is the context of the uploads' part uploads: cancelled by
	// close.
	ctx    context.Context
	cancel context.CancelFunc
}

func (s *fileSink[T]) newObjectDest(ctx context.Context) *objectDest {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	return &objectDest{store: s.cfg.store, prefix: s.dir, ctx: wctx, cancel: cancel}
}

// recover aborts this job's unfinished uploads that no checkpoint needs,
// by the rule of package sink/leftover (see localDest.recover): uploads of
// checkpoint n's committables have counters below the restored
// NextCounter and are kept for the committer.
func (d *objectDest) recover(ctx context.Context, r strayRequest) (int64, error) {
	var lstates []leftover.State
	for _, st := range r.states {
		if len(st.InProgress) > 0 || len(st.Held) > 0 {
			return 0, fmt.Errorf("file sink: restored writer state of subtask %d lists open or held local part files; it was taken by a sink on the local file system, not on object storage", st.Subtask)
		}
		if r.restored {
			lstates = append(lstates, r.leftoverState(st))
		}
	}
	prefix := d.prefix
	if prefix != "" {
		prefix += "/"
	}
	ups, err := d.store.Uploads(ctx, prefix)
	if err != nil {
		return 0, fmt.Errorf("file sink: list unfinished uploads under %q: %w", prefix, err)
	}
	byKey := map[string][]PendingUpload{}
	var existing []string
	for _, u := range ups {
		if len(byKey[u.Key]) == 0 {
			existing = append(existing, u.Key)
		}
		byKey[u.Key] = append(byKey[u.Key], u)
	}
	parser := baseParser{leftover.Scheme{Prefix: r.names.prefix + "-" + r.names.job + "-", Suffix: r.names.suffix}}
	strays, err := leftover.Abort(leftover.Request{Parser: parser, Subtask: r.sub, Parallelism: r.par,
		Restored: r.restored, States: lstates, Existing: existing})
	if err != nil {
		return 0, fmt.Errorf("file sink: unfinished uploads: %w", err)
	}
	removed := map[string]bool{}
	for _, k := range strays {
		removed[k] = true
		for _, u := range byKey[k] {
			if err := d.store.Abort(ctx, u.Key, u.UploadID); err != nil {
				return 0, fmt.Errorf("file sink: abort unfinished upload %s of %s: %w", u.UploadID, u.Key, err)
			}
		}
	}
	return r.nextAbove(parser, existing, removed), nil
}

func (d *objectDest) create(ctx context.Context, dir, final string) (partOut, error) {
	key := path.Join(d.prefix, dir, final)
	ok, err := d.store.Exists(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", key, err)
	}
	if ok {
		return nil, errNameTaken
	}
	up, err := d.store.Create(d.ctx, key)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", key, err)
	}
	return &objectPart{up: up, key: key}, nil
}

func (d *objectDest) resume(_ context.Context, ip inProgressFile, _ string) (partOut, error) {
	return nil, fmt.Errorf("file sink: cannot resume the local part file %s on an object store", ip.Temp)
}

func (d *objectDest) keepsOpen() bool                  { return false }
func (d *objectDest) checkpoint(context.Context) error { return nil }
func (d *objectDest) close() error                     { d.cancel(); return nil }

// objectPart is a multipart upload in progress.
type objectPart struct {
	up  ObjectUpload
	key string
}

func (p *objectPart) Write(b []byte) (int, error) { return p.up.Write(b) }
func (p *objectPart) name() string                { return p.key }
func (p *objectPart) temp() string                { return "" }
func (p *objectPart) sync() error                 { return nil }

// finish uploads the rest as the last part without completing the upload:
// the handle is the committable.
func (p *objectPart) finish(ctx context.Context) (committable, error) {
	handle, err := p.up.Prepare(ctx)
	if err != nil {
		_ = p.up.Abort(context.WithoutCancel(ctx))
		return committable{}, fmt.Errorf("prepare upload: %w", err)
	}
	return committable{Upload: string(handle)}, nil
}

func (p *objectPart) abandon(ctx context.Context) error { return p.up.Abort(ctx) }
