package file

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/klauspost/compress/flate"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Avro object container files (https://avro.apache.org/docs/1.12.0/specification/#object-container-files):
// a header (magic "Obj\x01", metadata with the schema and codec, a 16-byte
// sync marker), then blocks of (record count, byte size, records — possibly
// compressed, sync marker).

var avroMagic = []byte{'O', 'b', 'j', 1}

// maxAvroBlock bounds the size of a block the reader accepts (a corrupt
// size must not allocate gigabytes).
const maxAvroBlock = 1 << 30

// AvroFile is the source format of Avro object container files: each
// record of the file's schema (which must be a record schema) is read as
// a map[string]any in the value contract of CLI pipelines:
//
//	boolean → bool; int, long → int64; float, double → float64 (a float
//	  as the float64 of its shortest decimal form: 0.1, not 0.10000000149011612);
//	string, enum, uuid → string; bytes, fixed → []byte;
//	null → nil; a union → the value of its branch;
//	array → []any; map, record → map[string]any;
//	timestamp-millis/micros (also local-) and date → time.Time (UTC);
//	decimal → json.Number, exact; time-millis/micros → int64.
//
// The writer's schema is read from each file's header. readerSchema, if
// not "", is a reader schema for schema evolution (Avro's resolution
// rules): fields the reader schema does not have are dropped, fields the
// file does not have take the reader schema's default (a field without one
// fails with an error naming it and the file), int and long become float
// or double where the reader asks for them, and string and bytes
// interchange. A file whose schema cannot be resolved against it fails
// when it is opened. An invalid reader schema is reported by Err.
//
// Codecs null, deflate, snappy and zstandard are read. Files are not
// splittable; a reader resumes at the start of the block that holds the
// next record, skipping the records of the block already read (the
// position is the block's byte offset and a count, see [Split]; the offset
// of a record in [Position] is its block's, 0 for the first block). A
// corrupt block fails the reader with a [*RecordError] naming the file and
// the block's offset. A container file compressed as a whole (.gz, .zst)
// is read as a stream: its position is 0 and the number of records read,
// so a reader resumes by reading it again from the start and skipping
// them (block codecs are the better way to compress).
func AvroFile(readerSchema string) *AvroFileFormat {
	f := &AvroFileFormat{}
	if readerSchema != "" {
		s, err := parseAvroSchema(readerSchema)
		if err != nil {
			f.err = fmt.Errorf("%w: AvroFile reader schema: %w", ErrInvalidConfig, err)
		} else if s.Type() != avro.Record {
			f.err = fmt.Errorf("%w: AvroFile reader schema is %s, want a record", ErrInvalidConfig, s.Type())
		}
		f.reader = s
	}
	return f
}

// AvroFileFormat is the format [AvroFile] returns.
type AvroFileFormat struct {
	reader avro.Schema
	err    error
}

var _ RandomAccessFormat[map[string]any] = (*AvroFileFormat)(nil)

// Err reports an invalid reader schema (wrapping [ErrInvalidConfig]);
// NewReader and NewReaderAt return it too.
func (f *AvroFileFormat) Err() error { return f.err }

// Splittable is false: a container file is read by one split.
func (*AvroFileFormat) Splittable() bool { return false }

// NewReader reads a container file from its start (offset 0) as a stream;
// the source uses NewReaderAt for uncompressed files.
func (f *AvroFileFormat) NewReader(r io.Reader, offset int64) (RecordReader[map[string]any], error) {
	if f.err != nil {
		return nil, f.err
	}
	if offset != 0 {
		return nil, fmt.Errorf("file: Avro container file: a stream cannot resume at offset %d (the header is before it)", offset)
	}
	ar, err := f.open(bufio.NewReaderSize(r, defaultReadBuffer))
	if err != nil {
		return nil, err
	}
	// Every record reports offset 0: the source counts the records read,
	// and resumes by reading the stream again and skipping them.
	ar.stream = true
	return ar, nil
}

// NewReaderAt reads the header at the start of r, then resumes at offset
// (0 or a block's start) skipping skip records.
func (f *AvroFileFormat) NewReaderAt(r io.ReaderAt, size, offset, skip int64) (RecordReader[map[string]any], error) {
	if f.err != nil {
		return nil, f.err
	}
	hr := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 4096)
	ar, err := f.open(hr)
	if err != nil {
		return nil, err
	}
	if offset > 0 {
		if offset < ar.pos() || offset > size {
			return nil, fmt.Errorf("file: Avro container file: offset %d is not a block's start (the header ends at %d, the file at %d)", offset, ar.pos(), size)
		}
		ar.in = &countReader{r: bufio.NewReaderSize(io.NewSectionReader(r, offset, size-offset), defaultReadBuffer)}
		ar.origin, ar.off, ar.atStart = offset, offset, false
	} else {
		// Past the header: a new buffered reader, not the header's small one.
		at := ar.pos()
		ar.in = &countReader{r: bufio.NewReaderSize(io.NewSectionReader(r, at, size-at), defaultReadBuffer)}
		ar.origin, ar.off = at, at
	}
	for range skip {
		if _, _, err := ar.Read(); err != nil && !errors.Is(err, ErrMalformed) {
			return nil, fmt.Errorf("file: Avro container file: skip %d records of the block at offset %d: %w", skip, offset, err)
		}
	}
	return ar, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r *bufio.Reader
	n int64
}

func (c *countReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (f *AvroFileFormat) open(br *bufio.Reader) (*avroReader, error) {
	in := &countReader{r: br}
	h, err := readAvroHeader(in)
	if err != nil {
		return nil, err
	}
	ar := &avroReader{in: in, header: h, off: in.n, dec: avro.NewReader(nil, 0), atStart: true}
	if f.reader != nil {
		if err := avro.NewSchemaCompatibility().Compatible(f.reader, h.schema); err != nil {
			return nil, fmt.Errorf("file: Avro container file: the file's schema cannot be read with the reader schema: %w", err)
		}
		ar.project = f.reader
	}
	return ar, nil
}

type avroHeader struct {
	schema avro.Schema
	codec  string
	sync   [16]byte
}

func readAvroHeader(in *countReader) (*avroHeader, error) {
	var magic [4]byte
	if _, err := io.ReadFull(in, magic[:]); err != nil {
		return nil, fmt.Errorf("file: Avro container file: header: %w", err)
	}
	if !bytes.Equal(magic[:], avroMagic) {
		return nil, fmt.Errorf("file: not an Avro container file (magic %q at offset 0)", magic[:])
	}
	meta := map[string][]byte{}
	for range 1 << 20 {
		n, err := binary.ReadVarint(in)
		if err != nil {
			return nil, fmt.Errorf("file: Avro container file: header metadata: %w", err)
		}
		if n == 0 {
			break
		}
		if n < 0 {
			n = -n
			if _, err := binary.ReadVarint(in); err != nil {
				return nil, fmt.Errorf("file: Avro container file: header metadata: %w", err)
			}
		}
		for range n {
			k, err := readAvroBytes(in, 1<<20)
			if err != nil {
				return nil, fmt.Errorf("file: Avro container file: header metadata key: %w", err)
			}
			v, err := readAvroBytes(in, 64<<20)
			if err != nil {
				return nil, fmt.Errorf("file: Avro container file: header metadata %q: %w", k, err)
			}
			meta[string(k)] = v
		}
	}
	h := &avroHeader{codec: string(meta["avro.codec"])}
	if h.codec == "" {
		h.codec = "null"
	}
	switch h.codec {
	case "null", "deflate", "snappy", "zstandard":
	default:
		return nil, fmt.Errorf("file: Avro container file: codec %q is not supported (null, deflate, snappy, zstandard)", h.codec)
	}
	s, err := parseAvroSchema(string(meta["avro.schema"]))
	if err != nil {
		return nil, fmt.Errorf("file: Avro container file: header schema: %w", err)
	}
	if s.Type() != avro.Record {
		return nil, fmt.Errorf("file: Avro container file: the schema is %s, want a record", s.Type())
	}
	h.schema = s
	if _, err := io.ReadFull(in, h.sync[:]); err != nil {
		return nil, fmt.Errorf("file: Avro container file: header sync marker: %w", err)
	}
	return h, nil
}

func readAvroBytes(in *countReader, max int64) ([]byte, error) {
	n, err := binary.ReadVarint(in)
	if err != nil {
		return nil, err
	}
	if n < 0 || n > max {
		return nil, fmt.Errorf("length %d out of range", n)
	}
	if n > 1<<20 {
		// A corrupt length must not allocate it before the data is there.
		var buf bytes.Buffer
		_, err := io.CopyN(&buf, in, n)
		return buf.Bytes(), err
	}
	b := make([]byte, n)
	_, err = io.ReadFull(in, b)
	return b, err
}

// avroReader reads the records of one container file.
type avroReader struct {
	in         *countReader
	origin     int64 // file offset of in's first byte
	header     *avroHeader
	off        int64 // position reported: the block start, or 0 (see atStart)
	blockStart int64 // file offset of the current block
	dec        *avro.Reader
	left       int64 // records left in the current block
	raw        []byte
	data       []byte
	zr         io.ReadCloser // deflate reader, reused
	project    avro.Schema
	// atStart is true while no block with records has been read by a
	// reader that started at the file's start: its records report
	// offset 0, the position that reads the header again.
	atStart bool
	// stream is true for a reader of a stream (a file compressed as a
	// whole): every record reports offset 0.
	stream bool
}

// pos is the file offset of the next byte of in.
func (a *avroReader) pos() int64 { return a.origin + a.in.n }

// Read returns the next record. Its offset is the start of its block
// while records of the block remain, else the start of the next block.
func (a *avroReader) Read() (map[string]any, int64, error) {
	for tries := 0; a.left == 0; tries++ {
		if tries == 1<<20 {
			return nil, a.off, fmt.Errorf("file: Avro container file: too many empty blocks after offset %d", a.off)
		}
		if err := a.nextBlock(); err != nil {
			return nil, a.off, err
		}
	}
	v := decodeAvro(a.dec, a.header.schema)
	if a.dec.Error != nil {
		return nil, a.off, fmt.Errorf("file: Avro container file: corrupt block at offset %d: %w", a.blockStart, a.dec.Error)
	}
	a.left--
	next := a.off
	switch {
	case a.stream:
		next = 0
	case a.left == 0:
		next = a.pos()
	}
	m := v.(map[string]any)
	if a.project != nil {
		p, err := projectAvro(m, a.project, "")
		if err != nil {
			return nil, next, fmt.Errorf("%w: Avro record in the block at offset %d: %w", ErrMalformed, a.blockStart, err)
		}
		m = p.(map[string]any)
	}
	return m, next, nil
}

// nextBlock reads the next block header and data; io.EOF at the end.
func (a *avroReader) nextBlock() error {
	start := a.pos()
	a.off, a.blockStart = start, start
	if a.atStart {
		// Until a block with records is read, the position is the
		// file's start: resuming there reads the header and skips
		// records of the first block.
		a.off = 0
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("file: Avro container file: corrupt block at offset %d: %s", start, fmt.Sprintf(format, args...))
	}
	count, err := binary.ReadVarint(a.in)
	if errors.Is(err, io.EOF) && a.pos() == start {
		return io.EOF
	}
	if err != nil {
		return corrupt("record count: %v", unexpected(err))
	}
	size, err := binary.ReadVarint(a.in)
	if err != nil {
		return corrupt("byte size: %v", unexpected(err))
	}
	if count < 0 || size < 0 || size > maxAvroBlock || count > size+maxAvroItems {
		return corrupt("record count %d, byte size %d", count, size)
	}
	if size <= 1<<20 {
		a.raw = slices.Grow(a.raw[:0], int(size))[:size]
		if _, err := io.ReadFull(a.in, a.raw); err != nil {
			return corrupt("%d bytes of data: %v", size, unexpected(err))
		}
	} else {
		// A corrupt size must not allocate it before the data is there.
		buf := bytes.NewBuffer(a.raw[:0])
		if _, err := io.CopyN(buf, a.in, size); err != nil {
			return corrupt("%d bytes of data: %v", size, unexpected(err))
		}
		a.raw = buf.Bytes()
	}
	var sync [16]byte
	if _, err := io.ReadFull(a.in, sync[:]); err != nil {
		return corrupt("sync marker: %v", unexpected(err))
	}
	if sync != a.header.sync {
		return corrupt("wrong sync marker")
	}
	data, err := a.decompress(a.raw)
	if err != nil {
		return corrupt("%s codec: %v", a.header.codec, err)
	}
	a.data = data
	a.dec.Reset(data)
	a.dec.Error = nil
	a.left = count
	if count > 0 {
		a.atStart = false
	}
	return nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (a *avroReader) decompress(raw []byte) ([]byte, error) {
	switch a.header.codec {
	case "null":
		return raw, nil
	case "deflate":
		if a.zr == nil {
			a.zr = flate.NewReader(bytes.NewReader(raw))
		} else if err := a.zr.(flate.Resetter).Reset(bytes.NewReader(raw), nil); err != nil {
			return nil, err
		}
		return io.ReadAll(io.LimitReader(a.zr, maxAvroBlock))
	case "snappy":
		if len(raw) < 4 {
			return nil, errors.New("shorter than its checksum")
		}
		n, err := snappy.DecodedLen(raw[:len(raw)-4])
		if err != nil {
			return nil, err
		}
		if n > maxAvroBlock || n > 32*len(raw)+1024 {
			// Snappy expands at most about 21 times.
			return nil, fmt.Errorf("%d compressed bytes claim %d decompressed", len(raw), n)
		}
		out, err := snappy.Decode(nil, raw[:len(raw)-4])
		if err != nil {
			return nil, err
		}
		if crc32.ChecksumIEEE(out) != binary.BigEndian.Uint32(raw[len(raw)-4:]) {
			return nil, errors.New("checksum mismatch")
		}
		return out, nil
	case "zstandard":
		d, err := zstdBlocks()
		if err != nil {
			return nil, err
		}
		return d.DecodeAll(raw, nil)
	}
	return nil, fmt.Errorf("codec %q is not supported", a.header.codec)
}

// zstdBlocks is a zstd decoder for whole blocks (DecodeAll is safe for
// concurrent use), made once.
var zstdBlocks = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxAvroBlock))
})

// AvroOption configures [AvroBulk].
type AvroOption interface{ applyAvro(*avroConfig) }

type avroOptionFunc func(*avroConfig)

func (f avroOptionFunc) applyAvro(c *avroConfig) { f(c) }

type avroConfig struct {
	codec     string
	blockSize int
	errs      []error
}

// AvroCodec sets the block codec of the container files [AvroBulk] writes:
// "null", "deflate", "snappy" or "zstandard" (default "snappy", the
// default of Flink's avro format option avro.codec).
func AvroCodec(name string) AvroOption {
	return avroOptionFunc(func(c *avroConfig) {
		switch name {
		case "null", "deflate", "snappy", "zstandard":
			c.codec = name
		default:
			c.errs = append(c.errs, fmt.Errorf("%w: AvroCodec %q: want null, deflate, snappy or zstandard", ErrInvalidConfig, name))
		}
	})
}

// AvroBlockSize sets the uncompressed size at which [AvroBulk] ends a
// block (default 64000 bytes, the sync interval of Avro's Java
// DataFileWriter). A part file's last block ends when it is finished.
func AvroBlockSize(n int) AvroOption {
	return avroOptionFunc(func(c *avroConfig) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("%w: AvroBlockSize %d, must be at least 1", ErrInvalidConfig, n))
			return
		}
		c.blockSize = n
	})
}

// AvroBulk is the bulk format of Avro object container files for
// map[string]any records in the value contract (see [AvroFile]): every
// part file is one container file with schema (an Avro record schema, in
// JSON) in its header. Give the sink PartSuffix(".avro").
//
// Values are coerced to the schema: int64, int, json.Number and float64
// without a fraction to int and long (a value out of an int's range fails
// naming the field); numbers to float and double; time.Time, an RFC 3339
// string or a number of milliseconds (micros: microseconds) to timestamps;
// time.Time, "2006-01-02" or a number of days to date; json.Number,
// strings and numbers to decimal when exact at the scale and within the
// precision; string and []byte to each other, json.Number and time.Time
// (RFC 3339) to string; a string to an enum that
// has it as a symbol; nil to a union's null branch, and any other value to
// the first union branch of its own kind (a string to string, a map to a
// record), else to the first branch it can be coerced to. A field missing
// from the record takes the schema's default, or null if its type is a
// union with null, and fails naming the field otherwise. Keys of the record that the schema does not have are
// not written. Errors name the field path (address.zip, items[2].sku).
//
// Options: [AvroCodec] (default snappy), [AvroBlockSize] (default 64000).
// An invalid schema or option is reported by Err at once and fails the
// sink's first NewWriter, with an error wrapping [ErrInvalidConfig].
func AvroBulk(schema string, opts ...AvroOption) *AvroBulkFormat {
	c := avroConfig{codec: "snappy", blockSize: 64000}
	for _, o := range opts {
		o.applyAvro(&c)
	}
	b := &AvroBulkFormat{cfg: c}
	s, err := parseAvroSchema(schema)
	switch {
	case err != nil:
		c.errs = append(c.errs, fmt.Errorf("%w: AvroBulk schema: %w", ErrInvalidConfig, err))
	case s.Type() != avro.Record:
		c.errs = append(c.errs, fmt.Errorf("%w: AvroBulk schema is %s, want a record", ErrInvalidConfig, s.Type()))
	default:
		b.schema = s
		// The schema as given (compacted): with its defaults, docs and
		// aliases, which the canonical form drops.
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(schema)); err != nil {
			b.schemaJSON = []byte(s.String())
		} else {
			b.schemaJSON = buf.Bytes()
		}
	}
	b.err = errors.Join(c.errs...)
	return b
}

// AvroBulkFormat is the bulk format [AvroBulk] returns.
type AvroBulkFormat struct {
	cfg        avroConfig
	schema     avro.Schema
	schemaJSON []byte
	err        error
}

var _ BulkFormat[map[string]any] = (*AvroBulkFormat)(nil)

// Err reports an invalid schema or option (wrapping [ErrInvalidConfig]) at
// once; NewWriter returns it too.
func (b *AvroBulkFormat) Err() error { return b.err }

// NewWriter writes the header of a container file to w and returns a
// writer of its records.
func (b *AvroBulkFormat) NewWriter(w io.Writer) (BulkWriter[map[string]any], error) {
	if b.err != nil {
		return nil, b.err
	}
	aw := &avroWriter{f: b, w: w}
	if _, err := rand.Read(aw.sync[:]); err != nil {
		return nil, fmt.Errorf("file: Avro sync marker: %w", err)
	}
	// Header: magic, metadata map {avro.schema, avro.codec}, sync marker.
	h := append([]byte(nil), avroMagic...)
	h = appendLong(h, 2)
	h = appendBytes(h, []byte("avro.codec"))
	h = appendBytes(h, []byte(b.cfg.codec))
	h = appendBytes(h, []byte("avro.schema"))
	h = appendBytes(h, b.schemaJSON)
	h = appendLong(h, 0)
	h = append(h, aw.sync[:]...)
	if _, err := w.Write(h); err != nil {
		return nil, err
	}
	return aw, nil
}

type avroWriter struct {
	f     *AvroBulkFormat
	w     io.Writer
	sync  [16]byte
	enc   avroEncoder
	block []byte // encoded records of the open block
	count int64
	out   []byte
	zw    *flate.Writer
	zbuf  bytes.Buffer
}

func (a *avroWriter) Write(v map[string]any) error {
	n := len(a.block)
	var err error
	a.block, err = a.enc.encode(a.block, v, a.f.schema, "")
	if err != nil {
		a.block = a.block[:n]
		return fmt.Errorf("file: Avro record: %w", err)
	}
	a.count++
	if len(a.block) >= a.f.cfg.blockSize {
		return a.flush()
	}
	return nil
}

// flush writes the open block.
func (a *avroWriter) flush() error {
	if a.count == 0 {
		return nil
	}
	data, err := a.compress(a.block)
	if err != nil {
		return fmt.Errorf("file: Avro %s codec: %w", a.f.cfg.codec, err)
	}
	a.out = appendLong(a.out[:0], a.count)
	a.out = appendLong(a.out, int64(len(data)))
	a.out = append(a.out, data...)
	a.out = append(a.out, a.sync[:]...)
	a.block, a.count = a.block[:0], 0
	_, err = a.w.Write(a.out)
	return err
}

func (a *avroWriter) compress(b []byte) ([]byte, error) {
	switch a.f.cfg.codec {
	case "deflate":
		a.zbuf.Reset()
		if a.zw == nil {
			zw, err := flate.NewWriter(&a.zbuf, flate.DefaultCompression)
			if err != nil {
				return nil, err
			}
			a.zw = zw
		} else {
			a.zw.Reset(&a.zbuf)
		}
		if _, err := a.zw.Write(b); err != nil {
			return nil, err
		}
		if err := a.zw.Close(); err != nil {
			return nil, err
		}
		return a.zbuf.Bytes(), nil
	case "snappy":
		out := snappy.Encode(nil, b)
		return binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(b)), nil
	case "zstandard":
		e, err := zstdBlockEncoder()
		if err != nil {
			return nil, err
		}
		return e.EncodeAll(b, nil), nil
	}
	return b, nil
}

func (a *avroWriter) Finish() error { return a.flush() }

// zstdBlockEncoder compresses whole blocks (EncodeAll is safe for
// concurrent use), made once.
var zstdBlockEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
})
