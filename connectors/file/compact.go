package file

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/sluice-io/sluice/sink"
)

// CompactStrategy configures compaction of small part files (Flink's
// FileSink.enableCompact with a FileCompactStrategy); pass it to
// [Compact].
//
// A part file that is smaller than SizeThreshold when it is finished is a
// compaction candidate: it stays hidden after its checkpoint completes,
// and the sink's global committer merges the candidates of each bucket
// into files named <prefix>-<job>-compacted-<checkpoint>-<n><suffix>, which
// become visible atomically. Candidates are merged in an order that keeps
// every input split's records in order (see committable.Closed), in groups
// that are closed once they reach SizeThreshold; a group of a single file
// is renamed to its own part file name instead. Files at or above the
// threshold are committed as usual.
//
// Compacted data becomes visible when the global committer has run for
// the checkpoint that released it, a little after the per-subtask
// commits.
type CompactStrategy struct {
	// SizeThreshold is the size in bytes below which a finished part file
	// is a candidate, and the size at which a group of candidates is
	// closed. Required, at least 1.
	SizeThreshold int64
	// CheckpointsBeforeCompaction lets writers hold candidates back (in
	// their checkpointed state, still hidden) so that compaction merges
	// the files of several checkpoints: held files are released at the
	// first checkpoint whose id is a multiple of it (so all subtasks
	// release together, and a file waits fewer than that many
	// checkpoints), when a writer's held files of one bucket reach
	// SizeThreshold, and at the end of input. 0 or 1 compacts the
	// candidates of every checkpoint when it completes.
	CheckpointsBeforeCompaction int
	// Compactor merges a group of candidates into one file. nil means
	// [ConcatCompactor] for row formats and [GzipBulk]; other bulk formats
	// must set it.
	Compactor Compactor
}

// Compact enables compaction of small part files (off by default); see
// [CompactStrategy].
func Compact(s CompactStrategy) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if s.SizeThreshold < 1 {
			c.errs = append(c.errs, fmt.Errorf("%w: Compact: SizeThreshold is %d, must be at least 1", ErrInvalidConfig, s.SizeThreshold))
		}
		if s.CheckpointsBeforeCompaction < 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: Compact: CheckpointsBeforeCompaction is %d, must be at least 0", ErrInvalidConfig, s.CheckpointsBeforeCompaction))
		}
		c.compact = &s
	})
}

// Compactor merges part files into one (Flink's FileCompactor). It runs
// in the sink's global committer, one call per compacted file.
type Compactor interface {
	// Compact writes the records of srcs, in order, to dst. It must not
	// close or sync dst; the committer does.
	Compact(dst io.Writer, srcs []CompactInput) error
}

// CompactInput is one part file given to a [Compactor].
type CompactInput struct {
	// Name is the file's final name (with the sink's suffix, such as
	// "part-0-3.gz"); the file itself is still hidden.
	Name string
	// Reader reads the file's bytes.
	Reader io.Reader
}

// ConcatCompactor concatenates the files' bytes (Flink's
// ConcatFileCompactor). It is valid for every row format — a row part file
// can be appended to, so two of them in a row are one valid file — and for
// formats whose files may be concatenated, such as gzip members
// ([GzipBulk]; readers decompress multi-member files as one stream) or
// zstd frames. It is the default.
func ConcatCompactor() Compactor { return concatCompactor{} }

type concatCompactor struct{}

func (concatCompactor) Compact(dst io.Writer, srcs []CompactInput) error {
	for _, s := range srcs {
		if _, err := io.Copy(dst, s.Reader); err != nil {
			return fmt.Errorf("copy %s: %w", s.Name, err)
		}
	}
	return nil
}

// RecordWiseCompactor decodes every record of the files with decode and
// writes them into one file with encode (Flink's RecordWiseFileCompactor).
// Use it for formats that cannot be concatenated: a header that must appear
// once, a footer, or to compress a group as a whole rather than as
// concatenated members. Files whose name ends in .gz/.gzip or .zst/.zstd
// are decompressed before decoding. A record that cannot be decoded fails
// the compaction. For Avro container files and Parquet:
// RecordWiseCompactor(AvroFile(""), AvroBulk(schema)) and
// RecordWiseCompactor(ParquetFile(), ParquetBulk(schema)); files of a
// [RandomAccessFormat] are read into memory (candidates are small).
func RecordWiseCompactor[T any](decode Format[T], encode BulkFormat[T]) Compactor {
	return recordWise[T]{decode, encode}
}

type recordWise[T any] struct {
	decode Format[T]
	encode BulkFormat[T]
}

func (c recordWise[T]) Compact(dst io.Writer, srcs []CompactInput) error {
	bw, err := c.encode.NewWriter(dst)
	if err != nil {
		return fmt.Errorf("start compacted file: %w", err)
	}
	for _, s := range srcs {
		if err := c.copy(bw, s); err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
	}
	if err := bw.Finish(); err != nil {
		return fmt.Errorf("finish compacted file: %w", err)
	}
	return nil
}

func (c recordWise[T]) copy(bw BulkWriter[T], s CompactInput) error {
	in := s.Reader
	switch compressionOf(s.Name) {
	case gzipped:
		zr, err := gzip.NewReader(in)
		if err != nil {
			return fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		in = zr
	case zstded:
		zr, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fmt.Errorf("zstd: %w", err)
		}
		defer zr.Close()
		in = zr
	}
	var rr RecordReader[T]
	var err error
	if raf, ok := c.decode.(RandomAccessFormat[T]); ok {
		// Avro container files, Parquet: read through io.ReaderAt. A
		// candidate is smaller than the compaction threshold, so it is
		// read into memory.
		b, err := io.ReadAll(in)
		if err != nil {
			return err
		}
		rr, err = raf.NewReaderAt(bytes.NewReader(b), int64(len(b)), 0, 0)
		if err != nil {
			return err
		}
	} else if rr, err = c.decode.NewReader(in, 0); err != nil {
		return err
	}
	for {
		v, next, err := rr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("record before offset %d: %w", next, err)
		}
		if err := bw.Write(v); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
}

// compactingSink is a file sink with a global committer: compaction that
// merges the candidates, partition commit, or both.
type compactingSink[T any] struct{ *fileSink[T] }

var _ sink.GlobalCommitting[committable] = compactingSink[string]{}

func (s compactingSink[T]) CreateGlobalCommitter(ctx context.Context, ic sink.InitContext) (sink.GlobalCommitter[committable], error) {
	var inner globalCommitter
	if s.cfg.compact != nil {
		c, err := s.newCompactor(ic.JobID())
		if err != nil {
			return nil, err
		}
		if s.cfg.partCommit == nil {
			return c, nil
		}
		inner = c
	}
	pc, err := s.newPartitionCommitter(ctx, ic.JobID(), inner)
	if err != nil && inner != nil {
		inner.Close()
	}
	if err != nil {
		return nil, err
	}
	return pc, nil
}

// Names of the compaction's own files, all hidden (they start with '.')
// and none ending in ".inprogress", so writers' recovery never takes them
// for part files.
const (
	manifestSuffix   = ".compact-manifest"
	compactingSuffix = ".compacting"
)

// compactManifest is the redo log of one compaction, stored as
// .<target>.compact-manifest in the bucket directory.
type compactManifest struct {
	Checkpoint int64           `json:"checkpoint"`
	Target     string          `json:"target"`
	Temp       string          `json:"temp"`
	Sources    []manifestEntry `json:"sources"`
}

type manifestEntry struct {
	Temp  string `json:"temp"`
	Final string `json:"final"`
}

// compactCommitter is the file sink's global committer. It runs on the runtime's
// global-commit goroutine, one call at a time.
//
// A compaction of a group of candidates in one bucket directory is a redo
// log:
//
//  1. write .<target>.compact-manifest.tmp (sources, target), fsync, rename
//     it to .<target>.compact-manifest, fsync the directory;
//  2. write the merged file as .<target>.compacting, fsync;
//  3. rename it to <target>, fsync the directory — the records become
//     visible, once;
//  4. remove the sources, fsync the directory;
//  5. remove the manifest.
//
// Recovery (when the global committer starts, and at the next call for
// what a failed call left behind) reads every manifest: if the target
// exists, it finishes steps 4–5; if not, every source is still there, and
// it redoes steps 2–5. A stray .tmp manifest (a crash in step 1) is
// removed, its sources untouched. The records of a group are thus
// visible either in no file (before step 3) or in the target only; the
// sources are hidden throughout.
type compactCommitter struct {
	root  *os.Root
	dir   string
	cfg   *sinkConfig
	names partNames
	merge Compactor
	// oldDone: the compactions named before job ids were recovered (see
	// CommitGlobal).
	oldDone bool
	// open holds the manifests (root-relative) of compactions started by
	// this committer that have not finished: the next call finishes them.
	open map[string]bool
	// hook, if set, runs after each step; an error stops the call there
	// (a test seam for crashes between steps).
	hook func(step string) error
}

var _ sink.GlobalCommitter[committable] = (*compactCommitter)(nil)

func (s *fileSink[T]) newCompactor(jobID string) (*compactCommitter, error) {
	if err := checkJobID(jobID); err != nil {
		return nil, err
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	c := &compactCommitter{root: root, dir: s.dir, cfg: &s.cfg, merge: s.cfg.compact.Compactor, open: map[string]bool{}, hook: s.cfg.compactHook,
		names: partNames{prefix: s.cfg.prefix, suffix: s.cfg.suffix, job: jobID}}
	if c.merge == nil {
		c.merge = ConcatCompactor()
	}
	if err := c.recoverAll(context.Background(), jobID); err != nil {
		root.Close()
		return nil, err
	}
	return c, nil
}

func (c *compactCommitter) Close() error { return c.root.Close() }

func (c *compactCommitter) step(name string) error {
	if c.hook == nil {
		return nil
	}
	return c.hook(name)
}

func (c *compactCommitter) full(p string) string { return path.Join(c.dir, p) }

// recoverAll finishes every compaction of job that a crashed run left
// under the base directory and removes the stray files of its compactions
// that never got a manifest. job "" means the compactions named before job
// ids. Other jobs' compactions are left alone.
func (c *compactCommitter) recoverAll(ctx context.Context, job string) error {
	mine := "." + c.names.compactedPrefix(job)
	var manifests, strays []string
	err := fs.WalkDir(c.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		name := d.Name()
		if d.IsDir() || !strings.HasPrefix(name, mine) {
			return nil
		}
		switch {
		case strings.HasSuffix(name, manifestSuffix):
			manifests = append(manifests, p)
		case strings.HasSuffix(name, manifestSuffix+".tmp"):
			manifests = append(manifests, strings.TrimSuffix(p, ".tmp"))
		case strings.HasSuffix(name, compactingSuffix):
			strays = append(strays, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("file sink: look for unfinished compactions under %s: %w", c.dir, err)
	}
	slices.Sort(manifests)
	for _, m := range slices.Compact(manifests) {
		if err := c.recover(ctx, m); err != nil {
			return err
		}
	}
	for _, p := range strays {
		// A merged file without a manifest: its compaction finished
		// (then it was renamed) or was redone above under the same
		// name, so whatever is left is garbage.
		if err := c.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: remove stray compaction file %s: %w", c.full(p), err)
		}
	}
	return nil
}

// recover finishes the compaction of the manifest at mpath (root-relative),
// if there is one.
func (c *compactCommitter) recover(ctx context.Context, mpath string) error {
	if err := c.root.Remove(mpath + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file sink: remove unfinished compaction manifest %s.tmp: %w", c.full(mpath), err)
	}
	b, err := c.root.ReadFile(mpath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the compaction never started, or it finished
	}
	if err != nil {
		return fmt.Errorf("file sink: read compaction manifest %s: %w", c.full(mpath), err)
	}
	var m compactManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("file sink: compaction manifest %s is corrupt (it is written under a temporary name and renamed after fsync, so this is not a crash leftover): %w", c.full(mpath), err)
	}
	return c.finish(ctx, path.Dir(mpath), mpath, &m)
}

// finish runs the compaction of m in dir from wherever it stopped: it
// writes and renames the target unless it exists, then removes the
// sources and the manifest.
func (c *compactCommitter) finish(ctx context.Context, dir, mpath string, m *compactManifest) error {
	target, temp := path.Join(dir, m.Target), path.Join(dir, m.Temp)
	if !c.exists(target) {
		missing := 0
		for _, s := range m.Sources {
			if !c.exists(path.Join(dir, s.Temp)) {
				missing++
			}
		}
		switch {
		case missing == len(m.Sources):
			// Finished, and the compacted file was moved away since:
			// only the manifest is left.
			return c.removeManifest(mpath)
		case missing > 0:
			return fmt.Errorf("file sink: compaction manifest %s: %d of its %d source files are missing but the compacted file %s does not exist",
				c.full(mpath), missing, len(m.Sources), c.full(target))
		}
		if err := c.write(ctx, dir, temp, m); err != nil {
			return err
		}
		if err := c.root.Rename(temp, target); err != nil {
			return fmt.Errorf("file sink: compaction: rename %s to %s: %w", c.full(temp), c.full(target), err)
		}
		if err := syncDir(c.root, dir); err != nil {
			return fmt.Errorf("file sink: compaction: fsync directory %s: %w", c.full(dir), err)
		}
		if err := c.step("renamed"); err != nil {
			return err
		}
	}
	for i, s := range m.Sources {
		p := path.Join(dir, s.Temp)
		if err := c.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file sink: compaction: remove compacted source %s: %w", c.full(p), err)
		}
		if i == 0 {
			if err := c.step("first-source-removed"); err != nil {
				return err
			}
		}
	}
	// The removals must be durable before the manifest goes: a source
	// that reappeared without its manifest would be compacted again.
	if err := syncDir(c.root, dir); err != nil {
		return fmt.Errorf("file sink: compaction: fsync directory %s: %w", c.full(dir), err)
	}
	if err := c.step("sources-removed"); err != nil {
		return err
	}
	return c.removeManifest(mpath)
}

func (c *compactCommitter) removeManifest(mpath string) error {
	if err := c.root.Remove(mpath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("file sink: remove compaction manifest %s: %w", c.full(mpath), err)
	}
	delete(c.open, mpath)
	return nil
}

// write merges the sources of m into temp and fsyncs it.
func (c *compactCommitter) write(ctx context.Context, dir, temp string, m *compactManifest) (err error) {
	f, err := c.root.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, c.cfg.fileMode)
	if err != nil {
		return fmt.Errorf("file sink: compaction: create %s: %w", c.full(temp), err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("file sink: compaction: close %s: %w", c.full(temp), cerr)
		}
	}()
	var ins []CompactInput
	var files []*os.File
	defer func() {
		for _, sf := range files {
			sf.Close()
		}
	}()
	for _, s := range m.Sources {
		p := path.Join(dir, s.Temp)
		sf, err := c.root.Open(p)
		if err != nil {
			return fmt.Errorf("file sink: compaction: open source %s: %w", c.full(p), err)
		}
		files = append(files, sf)
		ins = append(ins, CompactInput{Name: s.Final, Reader: bufio.NewReaderSize(ctxReader{ctx, sf}, 64<<10)})
	}
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := c.merge.Compact(bw, ins); err != nil {
		return fmt.Errorf("file sink: compact %d files into %s: %w", len(ins), c.full(temp), err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("file sink: compaction: write %s: %w", c.full(temp), err)
	}
	if err := c.step("compacted-written"); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("file sink: compaction: fsync %s: %w", c.full(temp), err)
	}
	return nil
}

// ctxReader stops reading once ctx is done, so that a long compaction
// ends promptly when the job is cancelled.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

func (c *compactCommitter) exists(p string) bool {
	_, err := c.root.Lstat(p)
	return err == nil
}

// candidate is a compaction candidate with its position in write order.
type candidate struct {
	committable
	sub     int
	counter int64
}

// CommitGlobal compacts the candidates among committed, per bucket
// directory. It first finishes what an earlier call left unfinished.
// Candidates whose hidden file is gone were compacted (or renamed) by an
// earlier call and are skipped, so seeing committables again — grouped
// differently, under another checkpoint id — does no harm.
func (c *compactCommitter) CommitGlobal(ctx context.Context, checkpointID int64, committed []committable) error {
	for _, m := range slices.Sorted(maps.Keys(c.open)) {
		if err := c.recover(ctx, m); err != nil {
			return err
		}
	}
	if !c.oldDone {
		// A candidate named before job ids comes from a checkpoint of a
		// sink that named its compactions so too: finish those first.
		for _, cm := range committed {
			if job, _, _, ok := parsePartName(cm.Temp, c.names.prefix, c.names.suffix); ok && job == "" && cm.Compact {
				if err := c.recoverAll(ctx, ""); err != nil {
					return err
				}
				c.oldDone = true
				break
			}
		}
	}
	byDir := map[string][]candidate{}
	seen := map[string]bool{}
	for _, cm := range committed {
		if !cm.Compact {
			continue
		}
		dir, err := bucketDir(cm.Bucket)
		if err != nil {
			return fmt.Errorf("file sink: compaction: %w", err)
		}
		p := path.Join(dir, cm.Temp)
		if seen[p] {
			continue
		}
		seen[p] = true
		if _, err := c.root.Lstat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // compacted already
			}
			return fmt.Errorf("file sink: compaction: %s: %w", c.full(p), err)
		}
		cd := candidate{committable: cm, sub: -1}
		if _, sub, counter, ok := parsePartName(cm.Temp, c.names.prefix, c.names.suffix); ok {
			cd.sub, cd.counter = sub, counter
		}
		byDir[dir] = append(byDir[dir], cd)
	}
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		cands := byDir[dir]
		slices.SortFunc(cands, func(a, b candidate) int {
			if d := cmpInt64(a.Closed, b.Closed); d != 0 {
				return d
			}
			if a.AtRestore != b.AtRestore {
				if a.AtRestore {
					return 1
				}
				return -1
			}
			if d := cmpInt64(int64(a.sub), int64(b.sub)); d != 0 {
				return d
			}
			if d := cmpInt64(a.counter, b.counter); d != 0 {
				return d
			}
			return strings.Compare(a.Temp, b.Temp)
		})
		n := 0
		renamed := false
		for _, g := range c.groups(cands) {
			if err := ctx.Err(); err != nil {
				return err
			}
			if len(g) == 1 {
				if err := c.rename(dir, g[0]); err != nil {
					return err
				}
				renamed = true
				continue
			}
			if err := c.compact(ctx, dir, checkpointID, &n, g); err != nil {
				return err
			}
		}
		if renamed {
			if err := syncDir(c.root, dir); err != nil {
				return fmt.Errorf("file sink: fsync directory %s after commit: %w", c.full(dir), err)
			}
		}
	}
	return nil
}

// groups cuts the candidates, in order, into groups that reach the size
// threshold; a last group below it joins the one before.
func (c *compactCommitter) groups(cands []candidate) [][]candidate {
	var out [][]candidate
	var size int64
	start := 0
	for i, cd := range cands {
		size += cd.Size
		if size >= c.cfg.compact.SizeThreshold {
			out = append(out, cands[start:i+1])
			start, size = i+1, 0
		}
	}
	if start < len(cands) {
		if last := len(out) - 1; last >= 0 {
			out[last] = cands[start-len(out[last]):]
		} else {
			out = append(out, cands[start:])
		}
	}
	return out
}

// rename makes a lone candidate visible under its own part file name.
func (c *compactCommitter) rename(dir string, cd candidate) error {
	from, to := path.Join(dir, cd.Temp), path.Join(dir, cd.Final)
	if err := c.root.Rename(from, to); err != nil {
		if errors.Is(err, fs.ErrNotExist) && c.exists(to) {
			return nil
		}
		return fmt.Errorf("file sink: commit %s: %w", c.full(to), err)
	}
	return nil
}

// compact merges one group into
// <prefix>-<job>-compacted-<checkpoint>-<n><suffix> with the first n (from
// *n on) whose names are all free.
func (c *compactCommitter) compact(ctx context.Context, dir string, checkpointID int64, n *int, g []candidate) error {
	var target, temp, mpath string
	for ; ; *n++ {
		target = c.names.compacted(checkpointID, *n)
		temp = "." + target + compactingSuffix
		mpath = path.Join(dir, "."+target+manifestSuffix)
		if !c.exists(path.Join(dir, target)) && !c.exists(path.Join(dir, temp)) && !c.exists(mpath) && !c.exists(mpath+".tmp") {
			break
		}
	}
	*n++
	m := &compactManifest{Checkpoint: checkpointID, Target: target, Temp: temp}
	for _, cd := range g {
		m.Sources = append(m.Sources, manifestEntry{Temp: cd.Temp, Final: cd.Final})
	}
	c.open[mpath] = true // from here on, the next call finishes or undoes it
	if err := c.writeManifest(dir, mpath, m); err != nil {
		return err
	}
	return c.finish(ctx, dir, mpath, m)
}

// writeManifest writes m under a temporary name, fsyncs it, renames it to
// mpath and fsyncs the directory.
func (c *compactCommitter) writeManifest(dir, mpath string, m *compactManifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("file sink: compaction manifest %s: %w", c.full(mpath), err)
	}
	tmp := mpath + ".tmp"
	f, err := c.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, c.cfg.fileMode)
	if err != nil {
		return fmt.Errorf("file sink: create compaction manifest %s: %w", c.full(tmp), err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("file sink: write compaction manifest %s: %w", c.full(tmp), err)
	}
	if err := c.step("manifest-written"); err != nil {
		return err
	}
	if err := c.root.Rename(tmp, mpath); err != nil {
		return fmt.Errorf("file sink: rename compaction manifest %s: %w", c.full(tmp), err)
	}
	if err := syncDir(c.root, dir); err != nil {
		return fmt.Errorf("file sink: compaction: fsync directory %s: %w", c.full(dir), err)
	}
	return c.step("manifest")
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
