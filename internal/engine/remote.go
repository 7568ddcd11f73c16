package engine

// The coordinator's side of a task host in another process: a Remote sends
// deployments and mails over a Conn and turns what comes back into the
// coordinator's typed messages. remotehost.go is the other side.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// Conn carries frames between a coordinator and one task host: ordered,
// reliable and message oriented, like one gRPC bidirectional stream. One
// goroutine sends and another receives; Close may be called from any
// goroutine and makes pending and later calls fail.
type Conn interface {
	// Send sends one frame; it may block (flow control). The frame is not
	// used after Send returns.
	Send(frame []byte) error
	// Recv returns the next frame. An error ends the link.
	Recv() ([]byte, error)
	// Close ends the link.
	Close() error
}

// EventSource is implemented by sources whose enumerator and readers
// exchange events (source.Event) and whose readers may run on another task
// host than the coordinator: events cross hosts in the form of this
// serializer. A source without one keeps working in one process; its
// events to or from a reader on another host fail the job, saying so.
type EventSource interface {
	EventSerializer() serde.Versioned[source.Event]
}

// Remote is a task host in another process, reached over a Conn: the
// coordinator's end of the link. The other end runs Job.ServeTasks. A
// Remote serves one job; it is lost for good once its link breaks (its
// subtasks count as failed with ErrHostLost) — a host that comes back is a
// new Remote.
type Remote struct {
	id   string
	conn Conn
	log  *slog.Logger
	out  *queue[[]byte]
	stop chan struct{} // closed by Close
	once sync.Once
	wg   sync.WaitGroup // sender and receiver

	lostC    chan struct{} // closed when the link broke
	lostOnce sync.Once
	lostErr  error // set before lostC closes

	mu       sync.Mutex
	job      *Job // the job the hello announced
	sessions map[int]*remoteSession
	replies  map[uint64]chan *frame
	nextReq  uint64
	// onHello runs with the job when the first session opens (Loopback
	// starts serving it there).
	onHello  func(j *Job)
	deployed atomic.Int64
	xaddr    string // the host's record exchange address
}

// SetExchangeAddr sets the address of the host's record exchange server
// (its process's Network.Addr), which the subtasks of other hosts dial
// when the host runs a consumer of an edge that crosses hosts. Call it
// before the host is placed on.
func (r *Remote) SetExchangeAddr(addr string) {
	r.mu.Lock()
	r.xaddr = addr
	r.mu.Unlock()
}

func (r *Remote) exchangeAddr(*Job) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.xaddr
}

// NewRemote returns the task host at the other end of conn, named id
// (unique among a job's hosts; it orders them in placement). It owns conn
// and goroutines until Close. log defaults to slog.Default().
func NewRemote(id string, conn Conn, log *slog.Logger) *Remote {
	if log == nil {
		log = slog.Default()
	}
	r := &Remote{id: id, conn: conn, log: log.With("host", id), out: newQueue[[]byte](), stop: make(chan struct{}),
		lostC: make(chan struct{}), sessions: map[int]*remoteSession{}, replies: map[uint64]chan *frame{}}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		r.sendLoop()
	}()
	go func() {
		defer r.wg.Done()
		r.recvLoop()
	}()
	return r
}

// ID returns the host's id.
func (r *Remote) ID() string { return r.id }

// Deployed returns how many subtasks were deployed on the host so far
// (restarted ones again).
func (r *Remote) Deployed() int64 { return r.deployed.Load() }

func (r *Remote) live() bool {
	select {
	case <-r.lostC:
		return false
	default:
		return true
	}
}

// Lost is closed once the link broke or Close was called; Err then says
// why.
func (r *Remote) Lost() <-chan struct{} { return r.lostC }

// Err returns why the host was lost, or nil.
func (r *Remote) Err() error {
	select {
	case <-r.lostC:
		return r.lostErr
	default:
		return nil
	}
}

// Close ends the link and waits for the Remote's goroutines. Subtasks
// still placed on it count as failed with ErrHostLost.
func (r *Remote) Close() error {
	r.once.Do(func() { close(r.stop) })
	r.lose(errors.New("closed"))
	r.wg.Wait()
	return nil
}

// lose marks the host lost (once): the link is closed, waiting requests
// fail and every running subtask counts as exited with ErrHostLost.
func (r *Remote) lose(cause error) {
	r.lostOnce.Do(func() {
		r.lostErr = fmt.Errorf("%w: %s: %w", ErrHostLost, r.id, cause)
		close(r.lostC)
		_ = r.conn.Close()
		r.mu.Lock()
		ss := make([]*remoteSession, 0, len(r.sessions))
		for _, s := range r.sessions {
			ss = append(ss, s)
		}
		r.mu.Unlock()
		if len(ss) > 0 {
			r.log.Warn("task host lost; its subtasks fail over", "error", cause)
		}
		for _, s := range ss {
			s.lose(r.lostErr)
		}
	})
}

// send queues f for the host; frames to a lost host are dropped.
func (r *Remote) send(f *frame) {
	if !r.live() {
		return
	}
	r.out.Put(encodeFrame(f, r.sentinels()))
}

func (r *Remote) sentinels() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.job == nil {
		return builtinSentinels()
	}
	return r.job.cfg.sentinels()
}

func (r *Remote) sendLoop() {
	var buf [][]byte
	for {
		select {
		case <-r.lostC:
			return
		case <-r.out.Ready():
		}
		buf = r.out.Drain(buf)
		for _, b := range buf {
			if err := r.conn.Send(b); err != nil {
				r.lose(fmt.Errorf("send: %w", err))
				return
			}
		}
		clear(buf)
	}
}

func (r *Remote) recvLoop() {
	for {
		b, err := r.conn.Recv()
		if err != nil {
			r.lose(fmt.Errorf("receive: %w", err))
			return
		}
		f, err := decodeFrame(b, r.id, r.sentinels())
		if err != nil {
			r.lose(err)
			return
		}
		if err := r.dispatch(f); err != nil {
			r.lose(err)
			return
		}
	}
}

// dispatch hands a frame from the host to the request or session it is
// for. Frames of sessions that ended are dropped.
func (r *Remote) dispatch(f *frame) error {
	switch f.kind {
	case fHelloAck:
		if f.err != nil {
			return fmt.Errorf("the task host refused the job: %w", f.err)
		}
		return nil
	case fDeployed:
		r.mu.Lock()
		c := r.replies[f.req]
		delete(r.replies, f.req)
		r.mu.Unlock()
		if c != nil {
			c <- f
		}
		return nil
	case fSplitRequest, fReaderEvent, fAck, fFinished, fExited, fCommitted:
		r.mu.Lock()
		s := r.sessions[f.key.session]
		r.mu.Unlock()
		if s != nil {
			s.received(f)
		}
		return nil
	}
	return fmt.Errorf("unexpected frame of kind %d from the task host", f.kind)
}

// request sends f (an fDeploy) and waits for its reply.
func (r *Remote) request(ctx context.Context, f *frame) (*frame, error) {
	c := make(chan *frame, 1)
	r.mu.Lock()
	r.nextReq++
	f.req = r.nextReq
	r.replies[f.req] = c
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.replies, f.req)
		r.mu.Unlock()
	}()
	r.send(f)
	select {
	case reply := <-c:
		return reply, nil
	case <-r.lostC:
		return nil, r.lostErr
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// session returns the host's session for attempt a, opening it (and
// announcing the job with a hello on first use).
func (r *Remote) session(a *attempt) (*remoteSession, error) {
	r.mu.Lock()
	if s := r.sessions[a.number]; s != nil {
		r.mu.Unlock()
		return s, nil
	}
	if !r.live() {
		r.mu.Unlock()
		return nil, r.lostErr
	}
	hello := r.job == nil
	if hello {
		r.job = a.job
	} else if r.job != a.job {
		r.mu.Unlock()
		return nil, fmt.Errorf("task host %s serves job %q already; a Remote serves one job", r.id, r.job.name)
	}
	s := &remoteSession{r: r, a: a, number: a.number, running: map[taskKey]*remoteRun{}}
	r.sessions[a.number] = s
	onHello := r.onHello
	r.mu.Unlock()
	if hello {
		if onHello != nil {
			onHello(a.job)
		}
		r.send(&frame{kind: fHello, version: wireVersion, job: a.job.name, jobID: a.job.id, runID: a.job.runID, plan: a.job.plan()})
	}
	// The attempt's end ends the session: the host cancels its subtasks.
	context.AfterFunc(a.ctx, func() {
		r.send(&frame{kind: fEnd, session: s.number})
		s.end()
	})
	return s, nil
}

// plan describes the job's vertices for the hello: a host serves only a
// job of the same plan.
func (j *Job) plan() []string {
	out := make([]string, len(j.vertices))
	for i, v := range j.vertices {
		uids := make([]string, len(v.nodes))
		for k, n := range v.nodes {
			uids[k] = n.UID()
		}
		out[i] = fmt.Sprintf("%s %v p=%d", v.id, uids, v.parallelism)
	}
	return out
}

// remoteSession is one attempt's use of a Remote: the subtasks running
// there, each with the function that releases its wait groups when it
// exited.
type remoteSession struct {
	r      *Remote
	a      *attempt
	number int

	mu      sync.Mutex
	running map[taskKey]*remoteRun
	lost    error
	ended   bool
}

type remoteRun struct {
	gen  int
	done func()      // releases the attempt's and the region's wait groups
	stop func() bool // stops the cancel watch
}

// deploy builds tasks (stubs of this attempt placed on the host) there,
// from their restored states. It blocks the coordinator goroutine like a
// local build does.
func (s *remoteSession) deploy(tasks []*task, states map[taskKey]map[string]*checkpoint.TaskState, rt *routes) error {
	if len(tasks) == 0 {
		return nil
	}
	f := &frame{kind: fDeploy, session: s.number}
	if rt != nil {
		f.routes = &wireRoutes{self: rt.self, addrs: rt.addrs, hostOf: rt.hostOf}
	}
	for _, t := range tasks {
		e := t.env
		d := deployItem{key: wireKey{s.number, e.v.id, e.subtask, e.gen}, attemptNo: e.attemptNo, restoredID: e.restoredID}
		st := states[taskKey{e.v.id, e.subtask}]
		uids := make([]string, 0, len(st))
		for uid := range st {
			uids = append(uids, uid)
		}
		slices.Sort(uids)
		for _, uid := range uids {
			ts := *st[uid]
			ts.Vertex = uid
			d.states = append(d.states, ts)
		}
		f.deploy = append(f.deploy, d)
	}
	reply, err := s.r.request(s.a.ctx, f)
	if err != nil {
		return fmt.Errorf("deploy %d subtasks on task host %s: %w", len(tasks), s.r.id, err)
	}
	if reply.err != nil {
		return reply.err
	}
	if len(reply.upTos) != len(tasks) {
		return fmt.Errorf("deploy on task host %s: %d results for %d subtasks", s.r.id, len(reply.upTos), len(tasks))
	}
	for i, t := range tasks {
		t.remoteUpTo = reply.upTos[i]
	}
	s.r.deployed.Add(int64(len(tasks)))
	return nil
}

// start runs a deployed task on the host; done is called once it exited
// (its exit message is in the inbox by then) or the host was lost.
func (s *remoteSession) start(t *task, done func()) {
	k := taskKey{t.env.v.id, t.env.subtask}
	s.mu.Lock()
	if s.lost != nil {
		err := s.lost
		s.mu.Unlock()
		s.a.inbox.Put(taskExitedMsg{sender: t.env.self(), err: s.lostError(t, err)})
		done()
		return
	}
	run := &remoteRun{gen: t.env.gen, done: done}
	s.running[k] = run
	s.mu.Unlock()
	key := wireKey{s.number, k.vertex, k.subtask, t.env.gen}
	s.r.send(&frame{kind: fStart, session: s.number, keys: []wireKey{key}})
	// Cancelling the task's region (a failover, the attempt's end)
	// cancels it on the host.
	stop := context.AfterFunc(t.env.ctx, func() { s.r.send(&frame{kind: fCancel, key: key}) })
	s.mu.Lock()
	run.stop = stop
	s.mu.Unlock()
}

func (s *remoteSession) lostError(t *task, err error) error {
	return &TaskError{Operator: t.env.v.describe(), Subtask: t.env.subtask, Err: err}
}

// post sends a mail to a task on the host. Splits and events are
// serialized here; one that cannot be fails the job (as an enumerator
// failure).
func (s *remoteSession) post(t *task, m mail) {
	v := t.env.v
	f := &frame{kind: fMail, key: wireKey{s.number, v.id, t.env.subtask, t.env.gen}, mail: m.kind, id: m.id, stop: m.stop}
	var err error
	switch m.kind {
	case mailAddSplits:
		f.splits, err = v.head().src.(wireSource).encodeSplits(m.payload)
	case mailEvent:
		f.event, err = encodeEvent(v, m.payload)
	case mailCommitResult:
		err = errors.New("internal: a commit result does not cross hosts")
	}
	if err != nil {
		if s.a.enumFailure == nil {
			s.a.enumFailure = enumError(v, fmt.Sprintf("send to reader %d on task host %s", t.env.subtask, s.r.id), err)
		}
		return
	}
	s.r.send(f)
}

// received turns a frame of one of the host's tasks into the message the
// coordinator expects.
func (s *remoteSession) received(f *frame) {
	snd := f.key.sender()
	var m coordMsg
	switch f.kind {
	case fSplitRequest:
		m = splitRequestMsg{snd}
	case fReaderEvent:
		v := s.a.vertexByID[snd.vertex]
		if v == nil {
			m = remoteFailMsg{fmt.Errorf("task host %s: event from unknown operator %q", s.r.id, snd.vertex)}
			break
		}
		e, err := decodeEvent(v, f.event)
		if err != nil {
			m = remoteFailMsg{enumError(v, fmt.Sprintf("receive event from reader %d on task host %s", snd.subtask, s.r.id), err)}
			break
		}
		m = readerEventMsg{sender: snd, event: e}
	case fAck:
		m = ackMsg{sender: snd, id: f.id, states: f.states}
	case fFinished:
		m = taskFinishedMsg{snd}
	case fCommitted:
		m = committedMsg{sender: snd, upTo: f.upTo, committed: f.committed}
	case fExited:
		s.exited(f.key, f.err)
		return
	}
	s.a.inbox.Put(m)
}

// exited settles a task's exit: its message goes to the inbox, then its
// wait groups are released.
func (s *remoteSession) exited(k wireKey, err error) {
	s.mu.Lock()
	run := s.running[k.task()]
	if run == nil || run.gen != k.gen {
		s.mu.Unlock()
		return
	}
	delete(s.running, k.task())
	drop := s.ended && len(s.running) == 0
	stop := run.stop
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.a.inbox.Put(taskExitedMsg{sender: k.sender(), err: err})
	run.done()
	if drop {
		s.r.dropSession(s)
	}
}

// lose fails every running task of the session with err.
func (s *remoteSession) lose(err error) {
	s.mu.Lock()
	s.lost = err
	runs := s.running
	s.running = map[taskKey]*remoteRun{}
	s.mu.Unlock()
	keys := make([]taskKey, 0, len(runs))
	for k := range runs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b taskKey) int {
		if a.vertex != b.vertex {
			return cmpString(a.vertex, b.vertex)
		}
		return a.subtask - b.subtask
	})
	for _, k := range keys {
		run := runs[k]
		s.mu.Lock()
		stop := run.stop
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		v := s.a.vertexByID[k.vertex]
		s.a.inbox.Put(taskExitedMsg{sender: sender{vertex: k.vertex, subtask: k.subtask, gen: run.gen},
			err: &TaskError{Operator: v.describe(), Subtask: k.subtask, Err: err}})
		run.done()
	}
	s.r.dropSession(s)
}

// end records that the attempt ended; the session goes once its last task
// exited.
func (s *remoteSession) end() {
	s.mu.Lock()
	s.ended = true
	drop := len(s.running) == 0
	s.mu.Unlock()
	if drop {
		s.r.dropSession(s)
	}
}

func (r *Remote) dropSession(s *remoteSession) {
	r.mu.Lock()
	if r.sessions[s.number] == s {
		delete(r.sessions, s.number)
	}
	r.mu.Unlock()
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// remoteFailMsg fails the attempt with err (a message from a host that
// cannot be delivered).
type remoteFailMsg struct{ err error }

func (remoteFailMsg) coordMsg() {}

// post delivers a mail to the task: into its mailbox, or to its host.
func (t *task) post(m mail) {
	if t.remote != nil {
		t.remote.post(t, m)
		return
	}
	t.env.post(m)
}

// sinkCommittedUpTo is sinkTailOp.committedUpTo of the task's sink, as its
// host reported it for a remote task.
func (t *task) sinkCommittedUpTo(restoredID int64) int64 {
	if t.remote != nil {
		return t.remoteUpTo
	}
	return t.sinkOp.committedUpTo(restoredID)
}

// wireSource is what every source factory provides for remote hosts.
type wireSource interface {
	encodeSplits(splits any) ([][]byte, error)
	decodeSplits(b [][]byte) (any, error)
	eventSerializer() serde.Versioned[source.Event]
	aligned() bool
}

func (f *sourceFact[T, S, E]) encodeSplits(splits any) ([][]byte, error) {
	ss, ok := splits.([]S)
	if !ok {
		return nil, fmt.Errorf("internal: splits of type %T", splits)
	}
	b, err := serde.MarshalAll(f.src.SplitSerializer(), ss)
	if err != nil {
		return nil, fmt.Errorf("serialize splits: %w", err)
	}
	return b, nil
}

func (f *sourceFact[T, S, E]) decodeSplits(b [][]byte) (any, error) {
	ss, err := serde.UnmarshalAll(f.src.SplitSerializer(), b)
	if err != nil {
		return nil, fmt.Errorf("deserialize splits: %w", err)
	}
	return ss, nil
}

func (f *sourceFact[T, S, E]) eventSerializer() serde.Versioned[source.Event] {
	if es, ok := any(f.src).(EventSource); ok {
		return es.EventSerializer()
	}
	return nil
}

func (f *sourceFact[T, S, E]) aligned() bool {
	_, ok := f.ws.Alignment()
	return ok
}

// errNoEventSerializer is wrapped when an event must cross hosts and the
// source has no EventSerializer.
var errNoEventSerializer = errors.New("the source has no event serializer (engine.EventSource), so its events cannot cross task hosts; implement EventSerializer, or run the job in one process")

func encodeEvent(v *vertex, e source.Event) ([]byte, error) {
	ser := v.head().src.(wireSource).eventSerializer()
	if ser == nil {
		return nil, fmt.Errorf("event %T: %w", e, errNoEventSerializer)
	}
	b, err := serde.Marshal(ser, e)
	if err != nil {
		return nil, fmt.Errorf("serialize event %T: %w", e, err)
	}
	return b, nil
}

func decodeEvent(v *vertex, b []byte) (source.Event, error) {
	ser := v.head().src.(wireSource).eventSerializer()
	if ser == nil {
		return nil, errNoEventSerializer
	}
	e, err := serde.Unmarshal(ser, b)
	if err != nil {
		return nil, fmt.Errorf("deserialize event: %w", err)
	}
	return e, nil
}
