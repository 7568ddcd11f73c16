package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

const (
	// formatVersion is the version of both the state file and _metadata.
	formatVersion = 1

	stateMagic   = "SLCK"
	stateTrailer = "KCLS"

	stateFileName    = "state"
	metadataFileName = "_metadata"
	metadataTmpName  = "_metadata.tmp"

	// maxMetadataSize bounds how much of a _metadata file is read.
	maxMetadataSize = 1 << 20
	// ioBufferSize is the bufio buffer size for state files. Blobs larger
	// than the buffer bypass it.
	ioBufferSize = 256 << 10
	// maxPrealloc bounds how many elements a decoder allocates up front for a
	// count read from the file, so a corrupt count cannot force a huge
	// allocation before the data runs out.
	maxPrealloc = 1024
	// ctxCheckEvery is how many tasks are encoded or decoded between checks
	// of the context.
	ctxCheckEvery = 64
)

// castagnoli is the CRC-32C table; read-only after initialization.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// metadata is the JSON content of a _metadata file.
type metadata struct {
	FormatVersion int       `json:"formatVersion"`
	ID            int64     `json:"id"`
	Kind          Kind      `json:"kind"`
	Job           string    `json:"job"`
	Timestamp     time.Time `json:"timestamp"`
	StateFile     string    `json:"stateFile"`
	StateSize     int64     `json:"stateSize"`
	StateCRC32C   uint32    `json:"stateCRC32C"`
	Tasks         int       `json:"tasks"`
}

func (m *metadata) info(dir string) Info {
	return Info{ID: m.ID, Kind: m.Kind, JobName: m.Job, Timestamp: m.Timestamp, Path: dir, Size: m.StateSize}
}

// corruptf returns an error wrapping ErrCorrupt.
func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// formatError is a violation of the state file format found by the decoder;
// readState wraps it with ErrCorrupt.
type formatError struct {
	msg string
	err error // optional sentinel, e.g. ErrUnsupportedVersion
}

func (e *formatError) Error() string { return e.msg }
func (e *formatError) Unwrap() error { return e.err }

func formatErr(format string, args ...any) error {
	return &formatError{msg: fmt.Sprintf(format, args...)}
}

func unsupportedVersion(what string, v int) error {
	return fmt.Errorf("%w: %w %d in %s (this build reads version %d)", ErrCorrupt, ErrUnsupportedVersion, v, what, formatVersion)
}

// readMetadata reads and validates dir/_metadata. A missing file yields an
// error wrapping both ErrNotFound and fs.ErrNotExist.
func readMetadata(dir string) (*metadata, error) {
	path := filepath.Join(dir, metadataFileName)
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w (incomplete or not a snapshot directory): %w", ErrNotFound, err)
		}
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxMetadataSize+1))
	if err != nil {
		return nil, err
	}
	return parseMetadata(b, path)
}

// parseMetadata parses and validates the content of the _metadata file
// at path (named in errors).
func parseMetadata(b []byte, path string) (*metadata, error) {
	if len(b) > maxMetadataSize {
		return nil, fmt.Errorf("read %s: %w", path, corruptf("metadata larger than %d bytes", maxMetadataSize))
	}
	var m metadata
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, corruptf("invalid metadata: %v", err))
	}
	var err error
	switch {
	case m.FormatVersion != formatVersion:
		return nil, fmt.Errorf("read %s: %w", path, unsupportedVersion("metadata", m.FormatVersion))
	case m.ID < 0:
		err = corruptf("negative id %d", m.ID)
	case m.StateSize < 0:
		err = corruptf("negative state size %d", m.StateSize)
	case m.StateFile == "" || m.StateFile != filepath.Base(m.StateFile) || !filepath.IsLocal(m.StateFile) ||
		m.StateFile == metadataFileName || m.StateFile == metadataTmpName:
		// The state file must be a plain name inside the snapshot directory:
		// that keeps the directory relocatable and the metadata unable to
		// point anywhere else.
		err = corruptf("invalid state file name %q", m.StateFile)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	m.Timestamp = m.Timestamp.UTC()
	return &m, nil
}

// ---- encoding ----

type stringWriter interface {
	io.Writer
	io.StringWriter
}

// encoder writes the state file format. Errors are sticky: after the first
// one every write is a no-op, and err reports it.
type encoder struct {
	w    stringWriter
	tmp  [binary.MaxVarintLen64]byte
	keys []string // scratch for sorting map keys
	err  error
}

// sortedKeys returns m's keys in order, in scratch space valid until the
// next call.
func sortedKeys[V any](e *encoder, m map[string]V) []string {
	e.keys = e.keys[:0]
	for k := range m {
		e.keys = append(e.keys, k)
	}
	slices.Sort(e.keys)
	return e.keys
}

func (e *encoder) write(p []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
}

func (e *encoder) uvarint(v uint64) { e.write(e.tmp[:binary.PutUvarint(e.tmp[:], v)]) }
func (e *encoder) varint(v int64)   { e.write(e.tmp[:binary.PutVarint(e.tmp[:], v)]) }

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

// count writes a collection length: 0 for nil, n+1 otherwise.
func (e *encoder) count(n int, isNil bool) {
	if isNil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(n) + 1)
}

func (e *encoder) blob(b []byte) {
	e.count(len(b), b == nil)
	e.write(b)
}

// snapshot writes s in the state file format (see the package
// documentation). Map entries are written in key order, so equal snapshots
// produce equal files.
func (e *encoder) snapshot(ctx context.Context, s *Snapshot) error {
	e.write([]byte(stateMagic))
	e.write(binary.BigEndian.AppendUint16(e.tmp[:0], formatVersion))
	e.varint(s.ID)
	e.uvarint(uint64(s.Kind))
	e.str(s.JobName)
	e.varint(s.Timestamp.Unix())
	e.uvarint(uint64(s.Timestamp.Nanosecond()))

	e.count(len(s.Enumerators), s.Enumerators == nil)
	for _, k := range sortedKeys(e, s.Enumerators) {
		e.str(k)
		e.blob(s.Enumerators[k])
	}
	e.count(len(s.Properties), s.Properties == nil)
	for _, k := range sortedKeys(e, s.Properties) {
		e.str(k)
		e.str(s.Properties[k])
	}
	e.count(len(s.Tasks), s.Tasks == nil)
	for i := range s.Tasks {
		if i%ctxCheckEvery == 0 && e.err == nil {
			e.err = ctx.Err()
		}
		t := &s.Tasks[i]
		e.str(t.Vertex)
		e.varint(int64(t.Subtask))
		e.varint(int64(t.Parallelism))
		e.count(len(t.Parts), t.Parts == nil)
		for _, name := range sortedKeys(e, t.Parts) {
			e.str(name)
			blobs := t.Parts[name]
			e.count(len(blobs), blobs == nil)
			for _, b := range blobs {
				e.blob(b)
			}
		}
		if e.err != nil {
			break
		}
	}
	e.write([]byte(stateTrailer))
	return e.err
}

// crcWriter computes the CRC-32C of everything written through it.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// countWriter counts bytes; it sizes snapshots in Memory.
type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error)       { c.n += int64(len(p)); return len(p), nil }
func (c *countWriter) WriteString(s string) (int, error) { c.n += int64(len(s)); return len(s), nil }

// encodedSize is the size of s's state file.
func encodedSize(s *Snapshot) int64 {
	var c countWriter
	e := encoder{w: &c}
	_ = e.snapshot(context.Background(), s) // countWriter never fails
	return c.n
}

// ---- decoding ----

// crcReader computes the CRC-32C of everything read through it.
type crcReader struct {
	r   io.Reader
	crc uint32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc = crc32.Update(c.crc, castagnoli, p[:n])
	return n, err
}

// decoder reads the state file format. Every length and count is checked
// against the bytes left in the file before anything is allocated for it.
// Format violations and truncation are *formatError; read errors from the
// file are returned as they are.
type decoder struct {
	r       *bufio.Reader
	left    int64 // bytes of the file not yet consumed
	scratch []byte
	// interned holds short strings seen before: vertex and part names repeat
	// in every task.
	interned map[string]string
}

const (
	maxInternLen     = 64
	maxInternEntries = 4096
)

func (d *decoder) ReadByte() (byte, error) {
	if d.left <= 0 {
		return 0, formatErr("unexpected end of state")
	}
	b, err := d.r.ReadByte()
	if err != nil {
		if err == io.EOF {
			return 0, formatErr("file shorter than its recorded size")
		}
		return 0, err
	}
	d.left--
	return b, nil
}

func (d *decoder) full(p []byte) error {
	if int64(len(p)) > d.left {
		return formatErr("unexpected end of state")
	}
	n, err := io.ReadFull(d.r, p)
	d.left -= int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return formatErr("file shorter than its recorded size")
	}
	return err
}

func (d *decoder) uvarint() (uint64, error) {
	var x uint64
	var s uint
	for i := range binary.MaxVarintLen64 {
		b, err := d.ReadByte()
		if err != nil {
			return 0, err
		}
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				break
			}
			return x | uint64(b)<<s, nil
		}
		x |= uint64(b&0x7f) << s
		s += 7
	}
	return 0, formatErr("varint overflows 64 bits")
}

func (d *decoder) varint() (int64, error) {
	ux, err := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x, err
}

func (d *decoder) int() (int, error) {
	v, err := d.varint()
	if err == nil && int64(int(v)) != v {
		err = formatErr("integer %d out of range", v)
	}
	return int(v), err
}

// length reads a byte length and checks it against the rest of the file.
func (d *decoder) length() (int, error) {
	n, err := d.uvarint()
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left) {
		return 0, formatErr("length %d exceeds the %d bytes left", n, d.left)
	}
	return int(n), nil
}

// count reads a collection length written by encoder.count; it returns -1
// for nil. Every element takes at least one byte, so the count is checked
// against the rest of the file.
func (d *decoder) count() (int, error) {
	v, err := d.uvarint()
	if err != nil || v == 0 {
		return -1, err
	}
	if v-1 > uint64(d.left) {
		return 0, formatErr("count %d exceeds the %d bytes left", v-1, d.left)
	}
	return int(v - 1), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.length()
	if err != nil || n == 0 {
		return "", err
	}
	if cap(d.scratch) < n {
		d.scratch = make([]byte, n)
	}
	b := d.scratch[:n]
	if err := d.full(b); err != nil {
		return "", err
	}
	if n > maxInternLen {
		return string(b), nil
	}
	if s, ok := d.interned[string(b)]; ok {
		return s, nil
	}
	s := string(b)
	if d.interned == nil {
		d.interned = make(map[string]string)
	}
	if len(d.interned) < maxInternEntries {
		d.interned[s] = s
	}
	return s, nil
}

func (d *decoder) blob() ([]byte, error) {
	v, err := d.uvarint()
	if err != nil || v == 0 {
		return nil, err
	}
	if v-1 > uint64(d.left) {
		return nil, formatErr("blob length %d exceeds the %d bytes left", v-1, d.left)
	}
	b := make([]byte, v-1)
	return b, d.full(b)
}

func (d *decoder) snapshot(ctx context.Context) (*Snapshot, error) {
	var hdr [6]byte
	if err := d.full(hdr[:]); err != nil {
		return nil, err
	}
	if string(hdr[:4]) != stateMagic {
		return nil, formatErr("not a sluice state file (magic %q)", hdr[:4])
	}
	if v := int(binary.BigEndian.Uint16(hdr[4:])); v != formatVersion {
		return nil, &formatError{msg: fmt.Sprintf("%s %d in state file (this build reads version %d)", ErrUnsupportedVersion, v, formatVersion), err: ErrUnsupportedVersion}
	}
	s := &Snapshot{}
	var err error
	if s.ID, err = d.varint(); err != nil {
		return nil, err
	}
	kind, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if s.Kind = Kind(kind); kind > uint64(Savepoint) {
		return nil, formatErr("invalid kind %d", kind)
	}
	if s.JobName, err = d.str(); err != nil {
		return nil, err
	}
	sec, err := d.varint()
	if err != nil {
		return nil, err
	}
	nsec, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if nsec >= 1e9 {
		return nil, formatErr("invalid timestamp nanoseconds %d", nsec)
	}
	s.Timestamp = time.Unix(sec, int64(nsec)).UTC()

	if s.Enumerators, err = decodeMap(d, (*decoder).blob); err != nil {
		return nil, err
	}
	if s.Properties, err = decodeMap(d, (*decoder).str); err != nil {
		return nil, err
	}
	n, err := d.count()
	if err != nil {
		return nil, err
	}
	if n >= 0 {
		s.Tasks = make([]TaskState, 0, min(n, maxPrealloc))
	}
	for i := range n {
		if i%ctxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		t, err := d.task()
		if err != nil {
			return nil, fmt.Errorf("task %d: %w", i, err)
		}
		s.Tasks = append(s.Tasks, t)
	}
	var tr [len(stateTrailer)]byte
	if err := d.full(tr[:]); err != nil {
		return nil, err
	}
	if string(tr[:]) != stateTrailer {
		return nil, formatErr("bad trailer %q", tr[:])
	}
	if d.left != 0 {
		return nil, formatErr("%d unexpected bytes after the trailer", d.left)
	}
	return s, nil
}

func (d *decoder) task() (TaskState, error) {
	var t TaskState
	var err error
	if t.Vertex, err = d.str(); err != nil {
		return t, err
	}
	if t.Subtask, err = d.int(); err != nil {
		return t, err
	}
	if t.Parallelism, err = d.int(); err != nil {
		return t, err
	}
	n, err := d.count()
	if err != nil || n < 0 {
		return t, err
	}
	t.Parts = make(map[string][][]byte, min(n, maxPrealloc))
	for range n {
		name, err := d.str()
		if err != nil {
			return t, err
		}
		if _, dup := t.Parts[name]; dup {
			return t, formatErr("duplicate part %q", name)
		}
		m, err := d.count()
		if err != nil {
			return t, err
		}
		var blobs [][]byte
		if m >= 0 {
			blobs = make([][]byte, 0, min(m, maxPrealloc))
		}
		for range m {
			b, err := d.blob()
			if err != nil {
				return t, err
			}
			blobs = append(blobs, b)
		}
		t.Parts[name] = blobs
	}
	return t, nil
}

func decodeMap[V any](d *decoder, value func(*decoder) (V, error)) (map[string]V, error) {
	n, err := d.count()
	if err != nil || n < 0 {
		return nil, err
	}
	m := make(map[string]V, min(n, maxPrealloc))
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, formatErr("duplicate key %q", k)
		}
		if m[k], err = value(d); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readState reads and verifies the state file at path against m.
func readState(ctx context.Context, path string, m *metadata) (*Snapshot, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// _metadata is there but its state is not: the snapshot is broken.
			return nil, fmt.Errorf("%w: state file missing: %w", ErrCorrupt, err)
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("read %s: %w", path, corruptf("not a regular file (%s)", fi.Mode().Type()))
	}
	if fi.Size() != m.StateSize {
		return nil, fmt.Errorf("read %s: %w", path, corruptf("size is %d bytes, metadata says %d", fi.Size(), m.StateSize))
	}
	return decodeState(ctx, f, path, m)
}

// decodeState decodes and verifies a state file of m.StateSize bytes read
// from r (path names it in errors) against m.
func decodeState(ctx context.Context, r io.Reader, path string, m *metadata) (*Snapshot, error) {
	cr := &crcReader{r: r}
	d := &decoder{r: bufio.NewReaderSize(cr, ioBufferSize), left: m.StateSize}
	s, err := d.snapshot(ctx)
	if err != nil {
		if fe := (*formatError)(nil); errors.As(err, &fe) {
			// Report a checksum mismatch, the root cause of most format
			// errors, if there is one.
			if _, cerr := io.Copy(io.Discard, d.r); cerr == nil && cr.crc != m.StateCRC32C {
				err = corruptf("CRC-32C mismatch: computed %08x, _metadata says %08x (decoding failed: %v)", cr.crc, m.StateCRC32C, err)
			} else {
				err = fmt.Errorf("%w: %w", ErrCorrupt, err)
			}
		}
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if cr.crc != m.StateCRC32C {
		return nil, fmt.Errorf("read %s: %w", path, corruptf("CRC-32C mismatch: computed %08x, _metadata says %08x", cr.crc, m.StateCRC32C))
	}
	switch {
	case s.ID != m.ID:
		err = corruptf("state has id %d, metadata %d", s.ID, m.ID)
	case s.Kind != m.Kind:
		err = corruptf("state is a %s, metadata says %s", s.Kind, m.Kind)
	case s.JobName != m.Job:
		err = corruptf("state is of job %q, metadata says %q", s.JobName, m.Job)
	case !s.Timestamp.Equal(m.Timestamp):
		err = corruptf("state timestamp %v, metadata %v", s.Timestamp, m.Timestamp)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return s, nil
}
