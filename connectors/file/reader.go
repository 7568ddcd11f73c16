package file

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/klauspost/compress/zstd"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source/readerbase"
)

// record is a decoded record and the position after it.
type record[T any] struct {
	v    T
	next int64
}

// splitReader reads splits one after another on a fetcher goroutine.
type splitReader[T any] struct {
	format   Format[T]
	cfg      *sourceConfig
	errCount *metrics.Counter
	queue    []Split
	cur      *openSplit[T]
}

// openSplit is the split being read.
type openSplit[T any] struct {
	sp     Split
	f      *os.File
	dec    io.Closer // decompressor, if any
	rr     RecordReader[T]
	off    int64 // start of the next record
	closed bool
}

func (r *splitReader[T]) AddSplits(splits []Split) error {
	r.queue = append(r.queue, splits...)
	return nil
}

// Fetch reads up to the batch size of records from the current split.
// File reads do not block indefinitely, so ctx is only checked between
// batches.
func (r *splitReader[T]) Fetch(ctx context.Context) (readerbase.Batch[record[T]], error) {
	var b readerbase.Batch[record[T]]
	if err := ctx.Err(); err != nil {
		return b, err
	}
	if r.cur == nil {
		if len(r.queue) == 0 {
			<-ctx.Done()
			return b, ctx.Err()
		}
		sp := r.queue[0]
		r.queue = r.queue[1:]
		cur, err := r.open(sp)
		if err != nil {
			return b, err
		}
		r.cur = cur
	}
	cur := r.cur
	recs := make([]record[T], 0, r.cfg.batchSize)
	done := false
	// Skipped malformed records count too, so one call stays bounded.
	for tries := 0; len(recs) < cap(recs) && tries < 4*cap(recs); tries++ {
		if cur.sp.End >= 0 && cur.off >= cur.sp.End {
			done = true
			break
		}
		v, next, err := cur.rr.Read()
		switch {
		case err == nil:
			recs = append(recs, record[T]{v: v, next: next})
		case errors.Is(err, io.EOF):
			done = true
		case errors.Is(err, ErrMalformed) && r.cfg.malformed == SkipMalformed:
			r.errCount.Inc()
		default:
			rerr := &RecordError{File: cur.sp.Path, Offset: cur.off, Err: err}
			r.closeCur()
			return b, rerr
		}
		if done {
			break
		}
		cur.off = next
	}
	id := cur.sp.SplitID()
	b.Records = []readerbase.SplitRecords[record[T]]{{SplitID: id, Records: recs}}
	if done {
		b.Finished = []string{id}
		if err := r.closeCur(); err != nil {
			return b, fmt.Errorf("file: close %s: %w", cur.sp.Path, err)
		}
	}
	return b, nil
}

// open opens a split at its position: it seeks (uncompressed) or
// decompresses and discards (compressed) up to the offset, moves a fresh
// block split to its first record, and skips sp.Skip records.
func (r *splitReader[T]) open(sp Split) (*openSplit[T], error) {
	f, err := os.Open(sp.Path)
	if err != nil {
		return nil, &RecordError{File: sp.Path, Offset: sp.Offset, Err: err}
	}
	o := &openSplit[T]{sp: sp, f: f, off: sp.Offset}
	fail := func(err error) (*openSplit[T], error) {
		o.close()
		return nil, &RecordError{File: sp.Path, Offset: o.off, Err: err}
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
	for range sp.Skip {
		_, next, err := rr.Read()
		if err != nil && !errors.Is(err, ErrMalformed) {
			return fail(fmt.Errorf("skip %d records: %w", sp.Skip, err))
		}
		o.off = next
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

func (r *splitReader[T]) Close() error { return r.closeCur() }
