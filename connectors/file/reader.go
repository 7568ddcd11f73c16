package file

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source/readerbase"
)

// chunk is what one Fetch hands over: records of one split in read order
// and the position after the last of them. The emitter emits a whole
// chunk in one call; snapshots are taken between PollNext calls, never
// inside a chunk. Chunks are recycled with the batch that carries them.
type chunk[T any] struct {
	vs   []T
	next int64
	skip int64 // records to skip after next
	// starts is where each record of vs starts (fetchBatch with
	// PositionAs only).
	starts []int64
	// The batch's slices, kept so that a recycled chunk allocates
	// nothing.
	recs    [1]*chunk[T]
	groups  [1]readerbase.SplitRecords[*chunk[T]]
	fin     [1]string
	recycle func()
}

// splitReader reads splits one after another on a fetcher goroutine.
type splitReader[T any] struct {
	format   Format[T]
	cfg      *sourceConfig
	errCount *metrics.Counter
	// asRecord makes a dead letter of a malformed record (EmitMalformed).
	asRecord func(Malformed) T
	// withPos passes every record with its position (PositionAs).
	withPos func(T, Position) T
	// skipped counts skipped records not yet logged; lastLog is when the
	// last warning about them went out.
	skipped int64
	lastLog time.Time
	queue   []Split
	cur     *openSplit[T]
	// free holds recycled chunks. Recycle runs on the task goroutine, so
	// this is a channel rather than a slice.
	free chan *chunk[T]
	// ioCtx is the ctx files are opened with. A SourceFS file (s3://)
	// keeps it for its later reads, so it outlives one Fetch: it is
	// cancelled when the fetcher stops (a Fetch ctx done with a cause
	// other than readerbase.ErrWakeUp) and by Close, never by a wake-up.
	// A wake-up has nothing to interrupt here: Fetch returns after one
	// batch, and new splits wait in queue.
	ioCtx    context.Context
	ioCancel context.CancelFunc
	// failed is the error of a failed Fetch, returned by every later
	// one: the fetcher ignores an error returned after its ctx is done,
	// and the split it concerns must not then be dropped silently.
	failed error
}

// errNoSplit is returned by a Fetch called while the reader holds no
// split, which the fetcher never does: a split was lost.
var errNoSplit = errors.New("file: internal error: Fetch called with no split to read")

func newSplitReader[T any](f Format[T], cfg *sourceConfig, errCount *metrics.Counter) *splitReader[T] {
	r := &splitReader[T]{format: f, cfg: cfg, errCount: errCount}
	r.asRecord, _ = cfg.malformedAs.(func(Malformed) T)
	r.withPos, _ = cfg.positionAs.(func(T, Position) T)
	return r
}

// freeChunks bounds the recycled chunks a reader keeps: the hand-over
// queue holds 2 batches, one is being emitted and one fetched.
const freeChunks = 4

// newChunk returns a recycled chunk or a new one.
func (r *splitReader[T]) newChunk() *chunk[T] {
	if r.free == nil {
		r.free = make(chan *chunk[T], freeChunks)
	}
	select {
	case c := <-r.free:
		return c
	default:
	}
	c := &chunk[T]{vs: make([]T, 0, r.cfg.batchSize)}
	free := r.free
	c.recycle = func() {
		// The old records stay referenced until the next fetch
		// overwrites them: clearing them costs a write barrier per
		// record while the GC runs, and freeChunks bounds what stays.
		c.vs = c.vs[:0]
		select {
		case free <- c:
		default:
		}
	}
	return c
}

// openSplit is the split being read.
type openSplit[T any] struct {
	sp     Split
	id     string // sp.SplitID(), made once
	f      SourceFile
	dec    io.Closer // decompressor, if any
	rr     RecordReader[T]
	br     batchReader[T] // rr, if it reads many records per call
	off    int64          // start of the next record, or of its block
	skip   int64          // records read since off
	closed bool
}

// batchReader is implemented by record readers that read many records per
// call (text lines), saving an interface call and an allocation per
// record.
type batchReader[T any] interface {
	// readBatch appends up to max records that start before end (end < 0:
	// no limit) to dst and returns dst with the offset after the last
	// record it read. If starts is not nil, the offset where each record
	// starts is appended to it. It returns io.EOF when no record is left (at the end
	// of the file or of the block), together with the records appended
	// before. Any other error ends the file; malformed records are not
	// reported (text lines have none).
	readBatch(dst []T, max int, end int64, starts *[]int64) ([]T, int64, error)
}

func (r *splitReader[T]) AddSplits(splits []Split) error {
	r.queue = append(r.queue, splits...)
	return nil
}

// Fetch reads up to the batch size of records from the current split.
// File reads do not block indefinitely, so ctx is only checked between
// batches, and the reads themselves are interrupted only when the fetcher
// stops (see ioCtx).
func (r *splitReader[T]) Fetch(ctx context.Context) (readerbase.Batch[*chunk[T]], error) {
	if r.failed != nil {
		return readerbase.Batch[*chunk[T]]{}, r.failed
	}
	if err := ctx.Err(); err != nil {
		return readerbase.Batch[*chunk[T]]{}, err
	}
	unbind := r.bindIO(ctx)
	defer unbind()
	b, err := r.fetch()
	if err != nil {
		r.failed = err
	}
	return b, err
}

// bindIO cancels ioCtx (made on the first call) if ctx is done for any
// cause but a wake-up while the returned func has not been called.
func (r *splitReader[T]) bindIO(ctx context.Context) (unbind func() bool) {
	if r.ioCtx == nil {
		r.ioCtx, r.ioCancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	cancel := r.ioCancel
	return context.AfterFunc(ctx, func() {
		if !errors.Is(context.Cause(ctx), readerbase.ErrWakeUp) {
			cancel()
		}
	})
}

func (r *splitReader[T]) fetch() (readerbase.Batch[*chunk[T]], error) {
	var b readerbase.Batch[*chunk[T]]
	if r.cur == nil {
		if len(r.queue) == 0 {
			return b, errNoSplit
		}
		// The split leaves the queue only once it is open.
		cur, err := r.open(r.ioCtx, r.queue[0])
		if err != nil {
			return b, err
		}
		r.queue = r.queue[1:]
		r.cur = cur
	}
	cur := r.cur
	c := r.newChunk()
	var done bool
	var err error
	if cur.br != nil {
		done, err = r.fetchBatch(cur, c)
	} else {
		done, err = r.fetchRecords(cur, c)
	}
	if err != nil {
		r.closeCur()
		c.recycle()
		return b, err
	}
	c.next, c.skip = cur.off, cur.skip
	id := cur.id
	c.recs[0] = c
	c.groups[0] = readerbase.SplitRecords[*chunk[T]]{SplitID: id, Records: c.recs[:]}
	b.Records, b.Recycle = c.groups[:], c.recycle
	if done {
		c.fin[0] = id
		b.Finished = c.fin[:]
		if err := r.closeCur(); err != nil {
			return b, fmt.Errorf("file: close %s: %w", cur.sp.Path, err)
		}
	}
	return b, nil
}

// fetchBatch fills c through the split's batchReader. With PositionAs the
// batch reader also reports where each record starts, so records keep
// being read in batches.
func (r *splitReader[T]) fetchBatch(cur *openSplit[T], c *chunk[T]) (done bool, err error) {
	from := len(c.vs)
	var starts *[]int64
	if r.withPos != nil {
		c.starts = c.starts[:0]
		starts = &c.starts
	}
	c.vs, cur.off, err = cur.br.readBatch(c.vs, r.cfg.batchSize, cur.sp.End, starts)
	if r.withPos != nil {
		for i, off := range c.starts {
			c.vs[from+i] = r.withPos(c.vs[from+i], Position{Split: cur.id, File: cur.sp.Path, Offset: off})
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		return true, nil
	case err != nil:
		return false, &RecordError{File: cur.sp.Path, Offset: cur.off, Err: err}
	}
	return false, nil
}

// fetchRecords fills c one record at a time.
func (r *splitReader[T]) fetchRecords(cur *openSplit[T], c *chunk[T]) (done bool, err error) {
	// Skipped malformed records count too, so one call stays bounded.
	n := r.cfg.batchSize
	for tries := 0; len(c.vs) < n && tries < 4*n; tries++ {
		if cur.sp.End >= 0 && cur.off >= cur.sp.End {
			return true, nil
		}
		v, next, err := cur.rr.Read()
		switch {
		case err == nil:
			if r.withPos != nil {
				v = r.withPos(v, Position{Split: cur.id, File: cur.sp.Path, Offset: cur.off})
			}
			c.vs = append(c.vs, v)
		case errors.Is(err, io.EOF):
			return true, nil
		case errors.Is(err, ErrMalformed) && r.cfg.malformed == SkipMalformed:
			r.errCount.Inc()
			r.logSkipped(cur, err)
		case errors.Is(err, ErrMalformed) && r.cfg.malformed == EmitMalformed && r.asRecord != nil:
			r.errCount.Inc()
			m := Malformed{Split: cur.sp.SplitID(), File: cur.sp.Path, Offset: cur.off, Err: err}
			if re, ok := errors.AsType[*rawError](err); ok {
				m.Raw = re.raw
			}
			c.vs = append(c.vs, r.asRecord(m))
		case errors.Is(err, ErrMalformed) && r.format.Splittable():
			return false, &RecordError{File: cur.sp.Path, Offset: cur.off, Line: lineEndingAt(cur.sp.Path, next), Err: err}
		default:
			return false, &RecordError{File: cur.sp.Path, Offset: cur.off, Err: err}
		}
		cur.advance(next)
	}
	return false, nil
}

// advance moves the split's position past a record that returned next:
// records of a block report the block's start until its last one, so a
// position that did not move counts one more record to skip.
func (o *openSplit[T]) advance(next int64) {
	if next == o.off {
		o.skip++
		return
	}
	o.off, o.skip = next, 0
}

// logSkipped logs a skipped record with its position: the first one at
// once, later ones at most once per malformedLogEvery, with the number
// skipped since the last warning.
func (r *splitReader[T]) logSkipped(cur *openSplit[T], err error) {
	r.skipped++
	now := time.Now()
	if !r.lastLog.IsZero() && now.Sub(r.lastLog) < malformedLogEvery {
		return
	}
	r.cfg.logger.Warn("file: skipped a malformed record (on-malformed: skip)", "file", cur.sp.Path, "split", cur.sp.SplitID(),
		"offset", cur.off, "error", err, "skipped_since_last_warning", r.skipped)
	r.skipped, r.lastLog = 0, now
}

// open opens a split at its position: it seeks (uncompressed) or
// decompresses and discards (compressed) up to the offset, moves a fresh
// block split to its first record, and skips sp.Skip records.
func (r *splitReader[T]) open(ctx context.Context, sp Split) (*openSplit[T], error) {
	f, err := r.cfg.openFile(ctx, sp.Path)
	if err != nil {
		return nil, &RecordError{File: sp.Path, Offset: sp.Offset, Err: err}
	}
	o := &openSplit[T]{sp: sp, id: sp.SplitID(), f: f, off: sp.Offset}
	fail := func(err error) (*openSplit[T], error) {
		o.close()
		return nil, &RecordError{File: sp.Path, Offset: o.off, Err: err}
	}
	if raf, ok := r.format.(RandomAccessFormat[T]); ok && compressionOf(sp.Path) == uncompressed {
		st, err := f.Stat()
		if err != nil {
			return fail(err)
		}
		rr, err := raf.NewReaderAt(f, st.Size(), sp.Offset, sp.Skip)
		if err != nil {
			return fail(err)
		}
		o.rr, o.skip = rr, sp.Skip
		return o, nil
	}
	var in io.Reader
	switch compressionOf(sp.Path) {
	case uncompressed:
		align := sp.Start > 0 && sp.Offset == sp.Start
		seekTo := sp.Offset
		if align {
			seekTo = sp.Start - 1
		}
		if _, err := f.Seek(seekTo, io.SeekStart); err != nil {
			return fail(err)
		}
		br := bufio.NewReaderSize(f, defaultReadBuffer)
		if align {
			// The record that holds byte Start-1 belongs to the
			// previous block: start after the next '\n'.
			n, err := skipLine(br)
			if err != nil && !errors.Is(err, io.EOF) {
				return fail(err)
			}
			o.off = seekTo + n
		}
		in = br
	case gzipped:
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, defaultReadBuffer))
		if err != nil {
			return fail(fmt.Errorf("gzip: %w", err))
		}
		o.dec = zr
		in = zr
	case zstded:
		zr, err := zstd.NewReader(bufio.NewReaderSize(f, defaultReadBuffer), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return fail(fmt.Errorf("zstd: %w", err))
		}
		o.dec = zstdCloser{zr}
		in = zr
	}
	if compressionOf(sp.Path) != uncompressed && sp.Offset > 0 {
		if _, err := io.CopyN(io.Discard, in, sp.Offset); err != nil {
			return fail(fmt.Errorf("skip to offset: %w", err))
		}
	}
	rr, err := r.format.NewReader(in, o.off)
	if err != nil {
		return fail(err)
	}
	o.rr = rr
	o.br, _ = rr.(batchReader[T])
	for range sp.Skip {
		_, next, err := rr.Read()
		if err != nil && !errors.Is(err, ErrMalformed) {
			return fail(fmt.Errorf("skip %d records: %w", sp.Skip, err))
		}
		o.advance(next)
	}
	return o, nil
}

// skipLine reads through the next '\n' and returns the bytes read.
func skipLine(br *bufio.Reader) (int64, error) {
	var n int64
	for {
		line, err := br.ReadSlice('\n')
		n += int64(len(line))
		if !errors.Is(err, bufio.ErrBufferFull) {
			return n, err
		}
	}
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

func (o *openSplit[T]) close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	if o.dec != nil {
		errs = append(errs, o.dec.Close())
	}
	errs = append(errs, o.f.Close())
	return errors.Join(errs...)
}

func (r *splitReader[T]) closeCur() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.close()
	r.cur = nil
	return err
}

func (r *splitReader[T]) Close() error {
	if r.ioCancel != nil {
		defer r.ioCancel()
	}
	return r.closeCur()
}
