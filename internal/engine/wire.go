package engine

// The wire form of the messages between a coordinator and a task host in
// another process (remote.go, remotehost.go). A frame is one message: a
// kind byte, then its fields as unsigned varints, zig-zag varints and
// length-prefixed byte strings. Decoding checks every length against what
// is left, so a damaged frame is an error, never a panic or a huge
// allocation.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
)

// wireVersion is the version of the frame format, sent in the hello.
const wireVersion = 3

// frameKind is the first byte of a frame.
type frameKind byte

const (
	// coordinator → host
	fHello  frameKind = 1 + iota // job name, id, run id, plan
	fDeploy                      // build subtasks (reply: fDeployed)
	fStart                       // run built subtasks
	fMail                        // a mail to one subtask
	fCancel                      // cancel one subtask
	fEnd                         // end a session: cancel its subtasks
	// host → coordinator
	fHelloAck
	fDeployed
	fSplitRequest
	fReaderEvent
	fAck
	fFinished
	fExited
	fCommitted
)

// errShortFrame is wrapped by decoding errors of frames that end early.
var errShortFrame = errors.New("frame ends early")

// wbuf appends the fields of a frame.
type wbuf struct{ b []byte }

func (w *wbuf) byte(v byte)   { w.b = append(w.b, v) }
func (w *wbuf) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *wbuf) int(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *wbuf) bool(v bool) {
	var b byte
	if v {
		b = 1
	}
	w.byte(b)
}
func (w *wbuf) bytes(v []byte)  { w.uint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *wbuf) string(v string) { w.uint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *wbuf) blobs(v [][]byte) {
	w.uint(uint64(len(v)))
	for _, b := range v {
		w.bytes(b)
	}
}
func (w *wbuf) strings(v []string) {
	w.uint(uint64(len(v)))
	for _, s := range v {
		w.string(s)
	}
}

// rbuf reads the fields of a frame; the first error sticks.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", errShortFrame, what)
	}
}

func (r *rbuf) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail("byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *rbuf) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *rbuf) int() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length or element count that must fit in what is left
// (each element takes at least one byte).
func (r *rbuf) count() int {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail(fmt.Sprintf("count %d with %d bytes left", n, len(r.b)))
		return 0
	}
	return int(n)
}

func (r *rbuf) bool() bool { return r.byte() != 0 }

func (r *rbuf) bytes() []byte {
	n := r.count()
	if r.err != nil {
		return nil
	}
	v := slices.Clone(r.b[:n])
	r.b = r.b[n:]
	return v
}

func (r *rbuf) string() string { return string(r.bytes()) }

func (r *rbuf) blobs() [][]byte {
	n := r.count()
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = r.bytes()
	}
	return out
}

func (r *rbuf) strings() []string {
	n := r.count()
	if r.err != nil || n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = r.string()
	}
	return out
}

// end fails if bytes are left over: a frame of another version or kind.
func (r *rbuf) end(what string) error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("%s: %d bytes left over", what, len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("decode %s frame: %w", what, r.err)
	}
	return nil
}

// wireKey names one subtask of one session, in its generation.
type wireKey struct {
	session int
	vertex  string
	subtask int
	gen     int
}

func (w *wbuf) key(k wireKey) {
	w.uint(uint64(k.session))
	w.string(k.vertex)
	w.uint(uint64(k.subtask))
	w.uint(uint64(k.gen))
}

func (r *rbuf) key() wireKey {
	return wireKey{session: int(r.uint()), vertex: r.string(), subtask: int(r.uint()), gen: int(r.uint())}
}

func (k wireKey) sender() sender { return sender{vertex: k.vertex, subtask: k.subtask, gen: k.gen} }
func (k wireKey) task() taskKey  { return taskKey{k.vertex, k.subtask} }

func (w *wbuf) taskState(st checkpoint.TaskState) {
	w.string(st.Vertex)
	w.int(int64(st.Subtask))
	w.int(int64(st.Parallelism))
	parts := make([]string, 0, len(st.Parts))
	for name := range st.Parts {
		parts = append(parts, name)
	}
	slices.Sort(parts) // a deterministic frame
	w.uint(uint64(len(parts)))
	for _, name := range parts {
		w.string(name)
		w.bool(st.Parts[name] == nil)
		w.blobs(st.Parts[name])
	}
}

func (r *rbuf) taskState() checkpoint.TaskState {
	st := checkpoint.TaskState{Vertex: r.string(), Subtask: int(r.int()), Parallelism: int(r.int())}
	n := r.count()
	if r.err != nil {
		return st
	}
	st.Parts = make(map[string][][]byte, n)
	for range n {
		name := r.string()
		isNil := r.bool()
		blobs := r.blobs()
		if !isNil && blobs == nil {
			blobs = [][]byte{} // an empty part is not an absent one
		}
		st.Parts[name] = blobs
	}
	return st
}

// ErrHostLost is wrapped by the failure of every subtask of a task host
// whose link to the coordinator broke (a node that died or was cut off).
// It is recoverable: the restart strategy restarts the subtasks' regions on
// the hosts that remain.
var ErrHostLost = errors.New("task host lost")

// builtinSentinels are the errors whose identity (errors.Is) survives a
// task failure's trip from a remote host, matched by their text.
func builtinSentinels() []error {
	return []error{restart.ErrUnrecoverable, ErrPanic, context.Canceled, context.DeadlineExceeded,
		sink.ErrCommitFailed, ErrHostLost, ErrInvalidJob, errors.ErrUnsupported, ErrEdgeBroken}
}

// RemoteError is the cause of a failure that happened on another task host:
// its text there, and the sentinel errors it matched (errors.Is works for
// them: restart.ErrUnrecoverable, ErrPanic, context.Canceled,
// context.DeadlineExceeded, sink.ErrCommitFailed, ErrHostLost,
// ErrInvalidJob, errors.ErrUnsupported, and those of Config.RemoteErrors).
type RemoteError struct {
	// Host is the id of the task host.
	Host string
	// Text is the error's text on the host.
	Text     string
	matching []error
}

func (e *RemoteError) Error() string   { return e.Text }
func (e *RemoteError) Unwrap() []error { return e.matching }

// sentinels returns the built-in sentinels and the job's own.
func (c *Config) sentinels() []error {
	return append(builtinSentinels(), c.RemoteErrors...)
}

// error writes a task's failure: present, operator, subtask, text, and
// the texts of the sentinels it matches.
func (w *wbuf) error(err error, sentinels []error) {
	w.bool(err != nil)
	if err == nil {
		return
	}
	op, sub, inner := "", 0, err
	var te *TaskError
	isTask := errors.As(err, &te)
	if isTask {
		op, sub, inner = te.Operator, te.Subtask, te.Err
	}
	var tags []string
	for _, s := range sentinels {
		if errors.Is(err, s) && !slices.Contains(tags, s.Error()) {
			tags = append(tags, s.Error())
		}
	}
	w.bool(isTask)
	w.string(op)
	w.int(int64(sub))
	w.string(inner.Error())
	w.strings(tags)
}

// error reads what wbuf.error wrote. A failure that was a TaskError on the
// host is one again, around a RemoteError.
func (r *rbuf) error(host string, sentinels []error) error {
	if !r.bool() {
		return nil
	}
	isTask, op, sub, text, tags := r.bool(), r.string(), int(r.int()), r.string(), r.strings()
	re := &RemoteError{Host: host, Text: text}
	for _, tag := range tags {
		for _, s := range sentinels {
			if s.Error() == tag {
				re.matching = append(re.matching, s)
				break
			}
		}
	}
	if !isTask {
		return re
	}
	return &TaskError{Operator: op, Subtask: sub, Err: re}
}

// frame is one decoded message; which fields are set depends on kind.
type frame struct {
	kind frameKind
	// key addresses a subtask: fMail, fCancel and every task message.
	key wireKey
	// session: fDeploy, fStart, fEnd.
	session int
	// req pairs fDeploy with its fDeployed.
	req uint64

	// fHello: the job the coordinator runs, and its plan (vertex ids and
	// parallelism), which the host's job must match.
	version   int
	job       string
	jobID     string
	runID     string // fHello: the coordinator's run (Job.RunID)
	plan      []string
	deploy    []deployItem // fDeploy
	keys      []wireKey    // fStart
	mail      mailKind     // fMail
	id        int64        // fMail: checkpoint id; fAck
	stop      bool         // fMail: a stop's trigger
	splits    [][]byte     // fMail (mailAddSplits): serialized splits
	event     []byte       // fMail (mailEvent), fReaderEvent: a serialized event
	states    []checkpoint.TaskState
	err       error // fHelloAck (refused), fDeployed (a build failed), fExited
	upTo      int64 // fCommitted
	committed []pendingCommittable
	upTos     []int64     // fDeployed: per deployed subtask, how far its sink counts as committed
	routes    *wireRoutes // fDeploy: where every subtask runs, when edges cross hosts
}

// wireRoutes is a deployment's routes (see routes): the hosts' record
// exchange addresses, the host of each subtask by vertex, and which host
// the receiver is.
type wireRoutes struct {
	self   int
	addrs  []string
	hostOf [][]int
}

// deployItem is one subtask to build on a host.
type deployItem struct {
	key        wireKey
	attemptNo  int
	restoredID int64
	states     []checkpoint.TaskState
}

// routes writes a deployment's routes (a flag, then self, the addresses
// and the host of each subtask by vertex).
func (w *wbuf) routes(rt *wireRoutes) {
	w.bool(rt != nil)
	if rt == nil {
		return
	}
	w.uint(uint64(rt.self))
	w.strings(rt.addrs)
	w.uint(uint64(len(rt.hostOf)))
	for _, hs := range rt.hostOf {
		w.uint(uint64(len(hs)))
		for _, h := range hs {
			w.uint(uint64(h))
		}
	}
}

// routes reads what wbuf.routes wrote; host indexes must name an address.
func (r *rbuf) routes() *wireRoutes {
	if !r.bool() {
		return nil
	}
	rt := &wireRoutes{self: int(min(r.uint(), 1<<20)), addrs: r.strings()}
	n := r.count()
	for i := 0; i < n && r.err == nil; i++ {
		m := r.count()
		hs := make([]int, 0, min(m, 1024))
		for k := 0; k < m && r.err == nil; k++ {
			h := int(min(r.uint(), 1<<20))
			if h >= len(rt.addrs) {
				r.fail(fmt.Sprintf("route to host %d of %d", h, len(rt.addrs)))
			}
			hs = append(hs, h)
		}
		rt.hostOf = append(rt.hostOf, hs)
	}
	if rt.self >= len(rt.addrs) {
		r.fail(fmt.Sprintf("routes: self is host %d of %d", rt.self, len(rt.addrs)))
	}
	return rt
}

// encodeFrame returns the wire form of f.
func encodeFrame(f *frame, sentinels []error) []byte {
	w := &wbuf{b: make([]byte, 0, 64)}
	w.byte(byte(f.kind))
	switch f.kind {
	case fHello:
		w.uint(uint64(f.version))
		w.string(f.job)
		w.string(f.jobID)
		w.string(f.runID)
		w.strings(f.plan)
	case fDeploy:
		w.uint(f.req)
		w.uint(uint64(f.session))
		w.uint(uint64(len(f.deploy)))
		for _, d := range f.deploy {
			w.key(d.key)
			w.uint(uint64(d.attemptNo))
			w.int(d.restoredID)
			w.uint(uint64(len(d.states)))
			for _, st := range d.states {
				w.taskState(st)
			}
		}
		w.routes(f.routes)
	case fStart:
		w.uint(uint64(f.session))
		w.uint(uint64(len(f.keys)))
		for _, k := range f.keys {
			w.key(k)
		}
	case fMail:
		w.key(f.key)
		w.uint(uint64(f.mail))
		w.int(f.id)
		w.bool(f.stop)
		w.blobs(f.splits)
		w.bytes(f.event)
	case fCancel, fSplitRequest, fFinished:
		w.key(f.key)
	case fEnd:
		w.uint(uint64(f.session))
	case fHelloAck:
		w.error(f.err, sentinels)
	case fDeployed:
		w.uint(f.req)
		w.error(f.err, sentinels)
		w.uint(uint64(len(f.upTos)))
		for _, u := range f.upTos {
			w.int(u)
		}
	case fReaderEvent:
		w.key(f.key)
		w.bytes(f.event)
	case fAck:
		w.key(f.key)
		w.int(f.id)
		w.uint(uint64(len(f.states)))
		for _, st := range f.states {
			w.taskState(st)
		}
	case fExited:
		w.key(f.key)
		w.error(f.err, sentinels)
	case fCommitted:
		w.key(f.key)
		w.int(f.upTo)
		w.uint(uint64(len(f.committed)))
		for _, c := range f.committed {
			w.int(c.checkpoint)
			w.bytes(c.data)
		}
	}
	return w.b
}

// decodeFrame reverses encodeFrame. Errors decoded from the frame name host
// and keep the identity of sentinels.
func decodeFrame(b []byte, host string, sentinels []error) (*frame, error) {
	r := &rbuf{b: b}
	f := &frame{kind: frameKind(r.byte())}
	switch f.kind {
	case fHello:
		f.version = int(r.uint())
		f.job, f.jobID, f.runID, f.plan = r.string(), r.string(), r.string(), r.strings()
	case fDeploy:
		f.req, f.session = r.uint(), int(r.uint())
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			d := deployItem{key: r.key(), attemptNo: int(r.uint()), restoredID: r.int()}
			m := r.count()
			for j := 0; j < m && r.err == nil; j++ {
				d.states = append(d.states, r.taskState())
			}
			f.deploy = append(f.deploy, d)
		}
		f.routes = r.routes()
	case fStart:
		f.session = int(r.uint())
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			f.keys = append(f.keys, r.key())
		}
	case fMail:
		f.key, f.mail, f.id, f.stop = r.key(), mailKind(r.uint()), r.int(), r.bool()
		f.splits, f.event = r.blobs(), r.bytes()
		if f.mail > mailShutdown || f.mail == mailCommitResult {
			return nil, fmt.Errorf("decode mail frame: mail kind %d does not cross hosts", f.mail)
		}
	case fCancel, fSplitRequest, fFinished:
		f.key = r.key()
	case fEnd:
		f.session = int(r.uint())
	case fHelloAck:
		f.err = r.error(host, sentinels)
	case fDeployed:
		f.req = r.uint()
		f.err = r.error(host, sentinels)
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			f.upTos = append(f.upTos, r.int())
		}
	case fReaderEvent:
		f.key, f.event = r.key(), r.bytes()
	case fAck:
		f.key, f.id = r.key(), r.int()
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			f.states = append(f.states, r.taskState())
		}
	case fExited:
		f.key = r.key()
		f.err = r.error(host, sentinels)
	case fCommitted:
		f.key, f.upTo = r.key(), r.int()
		n := r.count()
		for i := 0; i < n && r.err == nil; i++ {
			f.committed = append(f.committed, pendingCommittable{checkpoint: r.int(), data: r.bytes()})
		}
	default:
		if r.err == nil {
			return nil, fmt.Errorf("decode frame: unknown kind %d (wire version %d)", f.kind, wireVersion)
		}
	}
	if err := r.end(fmt.Sprintf("kind %d", f.kind)); err != nil {
		return nil, err
	}
	return f, nil
}
