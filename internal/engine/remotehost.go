package engine

// The task host's side of a link to a coordinator in another process:
// Job.ServeTasks builds and runs the subtasks the coordinator deploys, hands
// them its mails, and sends back what they tell the coordinator. remote.go
// is the other side, wire.go the frames.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/source"
)

// ServeTasks runs in this process the subtasks that the coordinator at the
// other end of conn places here, until conn breaks or ctx ends; then it
// cancels them, waits for them and closes conn. j must be planned from the
// same graph as the coordinator's job (the coordinator's hello is refused
// otherwise); it is not Run, and its subtasks run under the coordinator's
// job id. It returns the error that ended the link (nil when ctx ended).
func (j *Job) ServeTasks(ctx context.Context, conn Conn) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	h := &taskHost{job: j, conn: conn, ctx: ctx, out: newQueue[[]byte](), in: newQueue[*frame](),
		sessions: map[int]*hostSession{}, attempts: map[int]*attempt{}}
	closeConn := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer closeConn()
	var recvErr error
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		h.sendLoop(cancel)
	}()
	go func() {
		defer h.wg.Done()
		recvErr = h.recvLoop()
		cancel() // a broken link cancels everything, a build in progress too
	}()
	err := h.controlLoop()
	cancel()
	for _, s := range h.sessions {
		s.endSession()
	}
	h.wg.Wait()
	if err == nil {
		err = recvErr
	}
	switch {
	case h.refused != nil:
		err = h.refused
	case parent.Err() != nil:
		err = nil
	}
	_ = conn.Close()
	return err
}

// taskHost is the state of one ServeTasks. One goroutine receives frames
// and queues them (in); the control goroutine (ServeTasks's own) handles
// them in order and alone touches sessions. A deployment runs connector
// code there and may block; the receiving goroutine still notices a
// broken link (it cancels ctx) and the end of a session (it cancels the
// session), so that such a build is cancelled.
type taskHost struct {
	job      *Job // as given
	view     *Job // the job under the coordinator's id, after the hello
	conn     Conn
	ctx      context.Context
	out      *queue[[]byte]
	in       *queue[*frame]
	wg       sync.WaitGroup // sender, receiver, forwarders (which wait for their tasks)
	sessions map[int]*hostSession
	// refused is why the hello was refused: the host then ignores the
	// coordinator until it closes the link (so that the refusal reaches
	// it).
	refused error

	mu       sync.Mutex
	attempts map[int]*attempt // by session, for the receiving goroutine
}

// hostSession is the host's part of one coordinator attempt: a host-side
// attempt whose inbox is forwarded to the coordinator.
type hostSession struct {
	h     *taskHost
	att   *attempt
	tasks map[taskKey]*hostTask // the newest generation of each subtask
	// ended is closed by endSession, on the control goroutine, after
	// which no task of the session starts.
	ended chan struct{}
}

type hostTask struct {
	t       *task
	cancel  context.CancelCauseFunc
	started bool
}

func (h *taskHost) send(f *frame) { h.out.Put(encodeFrame(f, h.job.cfg.sentinels())) }

func (h *taskHost) sendLoop(cancel context.CancelFunc) {
	var buf [][]byte
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-h.out.Ready():
		}
		buf = h.out.Drain(buf)
		for _, b := range buf {
			if err := h.conn.Send(b); err != nil {
				h.job.log.Warn("task host: send to the coordinator failed; ending the link", "error", err)
				cancel()
				return
			}
		}
		clear(buf)
	}
}

// recvLoop queues the coordinator's frames until the link breaks. What
// must not wait behind a blocked build acts at once: a shutdown mail marks
// its attempt finishing, the end of a session cancels it.
func (h *taskHost) recvLoop() error {
	for {
		b, err := h.conn.Recv()
		if err != nil {
			return fmt.Errorf("task host: receive from the coordinator: %w", err)
		}
		f, err := decodeFrame(b, "coordinator", h.job.cfg.sentinels())
		if err != nil {
			return fmt.Errorf("task host: %w", err)
		}
		switch {
		case f.kind == fMail && f.mail == mailShutdown:
			if a := h.attempt(f.key.session); a != nil {
				a.finishing.Store(true)
			}
		case f.kind == fEnd:
			if a := h.attempt(f.session); a != nil {
				a.cancel()
			}
		}
		h.in.Put(f)
	}
}

func (h *taskHost) attempt(session int) *attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.attempts[session]
}

// controlLoop handles the queued frames in order until ctx ends or a frame
// ends the link.
func (h *taskHost) controlLoop() error {
	var buf []*frame
	for {
		select {
		case <-h.ctx.Done():
			return nil
		case <-h.in.Ready():
		}
		buf = h.in.Drain(buf)
		for _, f := range buf {
			if err := h.handle(f); err != nil {
				return err
			}
		}
		clear(buf)
	}
}

// handle steps on one frame from the coordinator.
func (h *taskHost) handle(f *frame) error {
	if h.refused != nil {
		return nil
	}
	if f.kind != fHello && h.view == nil {
		return fmt.Errorf("task host: frame of kind %d before the hello", f.kind)
	}
	switch f.kind {
	case fHello:
		if err := h.hello(f); err != nil {
			h.job.log.Error("task host: refused the coordinator's job", "error", err)
			h.refused = err
			h.send(&frame{kind: fHelloAck, err: err})
			return nil
		}
		h.send(&frame{kind: fHelloAck})
	case fDeploy:
		h.send(h.deploy(f))
	case fStart:
		s := h.sessions[f.session]
		for _, k := range f.keys {
			if s == nil {
				h.send(&frame{kind: fExited, key: k, err: &TaskError{Operator: k.vertex, Subtask: k.subtask,
					Err: fmt.Errorf("task host: start in a session that ended: %w", context.Canceled)}})
				continue
			}
			s.start(k)
		}
	case fMail:
		if s := h.sessions[f.key.session]; s != nil {
			s.mail(f)
		}
	case fCancel:
		if s := h.sessions[f.key.session]; s != nil {
			s.cancelTask(f.key)
		}
	case fEnd:
		if s := h.sessions[f.session]; s != nil {
			s.endSession()
			delete(h.sessions, f.session)
			h.mu.Lock()
			delete(h.attempts, f.session)
			h.mu.Unlock()
		}
	default:
		return fmt.Errorf("task host: unexpected frame of kind %d from the coordinator", f.kind)
	}
	return nil
}

// hello checks that the coordinator runs this job.
func (h *taskHost) hello(f *frame) error {
	if f.version != wireVersion {
		return fmt.Errorf("task host: wire version %d, want %d", f.version, wireVersion)
	}
	if h.view != nil {
		return errors.New("task host: a second hello")
	}
	if f.job != h.job.name || !slices.Equal(f.plan, h.job.plan()) {
		return fmt.Errorf("%w: task host: the coordinator runs job %q with plan %v, this host's job is %q with plan %v; run the same pipeline everywhere",
			ErrInvalidJob, f.job, f.plan, h.job.name, h.job.plan())
	}
	j := h.job
	h.view = &Job{name: j.name, id: f.jobID, runID: f.runID, cfg: j.cfg, vertices: j.vertices, storage: j.storage, log: j.log, metricRoot: j.metricRoot,
		regions: j.regions, regionOf: j.regionOf, chains: j.chains, chainOf: j.chainOf, stopC: make(chan struct{}), spC: make(chan *savepointReq)}
	j.log.Info("task host serving a coordinator", "job_id", f.jobID, "run_id", f.runID)
	return nil
}

// deploy builds the subtasks of f, with fresh channels for their edges (a
// deployment holds whole regions). If one fails, those built are closed.
func (h *taskHost) deploy(f *frame) *frame {
	reply := &frame{kind: fDeployed, req: f.req}
	s := h.sessions[f.session]
	if s == nil {
		s = h.newSession(f.session)
	}
	a := s.att
	channels := map[*edge]any{}
	for _, v := range a.job.vertices {
		for _, e := range v.outputs {
			channels[e] = e.from.out.newChannels(v.parallelism, e.to.parallelism, e.part == Forward, a.job.cfg.ChannelCapacity)
		}
	}
	rt, err := h.routes(f.routes, a)
	if err != nil {
		reply.err = err
		return reply
	}
	var built []*hostTask
	for _, d := range f.deploy {
		v := a.vertexByID[d.key.vertex]
		if v == nil || d.key.subtask < 0 || d.key.subtask >= v.parallelism {
			reply.err = fmt.Errorf("task host: no subtask %d of %q in this job", d.key.subtask, d.key.vertex)
			break
		}
		states := map[string]*checkpoint.TaskState{}
		for i := range d.states {
			states[d.states[i].Vertex] = &d.states[i]
		}
		ctx, cancel := context.WithCancelCause(a.ctx)
		t := a.newTask(v, d.key.subtask, ctx, d.key.gen, d.attemptNo, d.restoredID)
		if err := t.build(channels, states, rt); err != nil {
			cancel(nil)
			reply.err = &TaskError{Operator: v.describe(), Subtask: d.key.subtask, Err: err}
			break
		}
		built = append(built, &hostTask{t: t, cancel: cancel})
		upTo := d.restoredID
		if t.sinkOp != nil {
			upTo = t.sinkOp.committedUpTo(d.restoredID)
		}
		reply.upTos = append(reply.upTos, upTo)
	}
	if reply.err != nil {
		for _, ht := range built {
			_ = ht.t.close()
			ht.cancel(nil)
		}
		reply.upTos = nil
		return reply
	}
	keys := make([]string, 0, len(built))
	for _, ht := range built {
		keys = append(keys, fmt.Sprintf("%s/%d", ht.t.env.v.id, ht.t.env.subtask))
	}
	h.job.log.Info("task host: subtasks deployed", "session", f.session, "subtasks", strings.Join(keys, " "))
	for _, ht := range built {
		k := taskKey{ht.t.env.v.id, ht.t.env.subtask}
		if old := s.tasks[k]; old != nil && !old.started {
			_ = old.t.close()
			old.cancel(nil)
		}
		s.tasks[k] = ht
	}
	return reply
}

// routes checks a deployment's routes against the job and this host's
// Network; nil when every channel is in process.
func (h *taskHost) routes(w *wireRoutes, a *attempt) (*routes, error) {
	if w == nil {
		return nil, nil
	}
	j := a.job
	if len(w.hostOf) != len(j.vertices) {
		return nil, fmt.Errorf("task host: routes for %d operators, the job has %d", len(w.hostOf), len(j.vertices))
	}
	for i, v := range j.vertices {
		if len(w.hostOf[i]) != v.parallelism {
			return nil, fmt.Errorf("task host: routes for %d subtasks of %s, it has %d", len(w.hostOf[i]), v.id, v.parallelism)
		}
	}
	rt := &routes{self: w.self, addrs: w.addrs, hostOf: w.hostOf, net: j.cfg.Network, job: channelJob(j)}
	if rt.net == nil {
		for vi := range w.hostOf {
			for i := range w.hostOf[vi] {
				if rt.peer(vi, i) != "" {
					return nil, fmt.Errorf("%w: task host: the coordinator places subtasks here whose edges cross task hosts, but this host has no record exchange (engine.Config.Network)", ErrInvalidJob)
				}
			}
		}
		return nil, nil
	}
	return rt, nil
}

// newSession sets up the host-side attempt of a coordinator attempt and
// the goroutine that forwards its messages.
func (h *taskHost) newSession(number int) *hostSession {
	a := &attempt{job: h.view, number: number, inbox: newQueue[coordMsg](), vertexByID: map[string]*vertex{}, hosted: true}
	a.ctx, a.cancel = context.WithCancel(h.ctx)
	for _, v := range h.view.vertices {
		a.vertexByID[v.id] = v
	}
	s := &hostSession{h: h, att: a, tasks: map[taskKey]*hostTask{}, ended: make(chan struct{})}
	h.sessions[number] = s
	h.mu.Lock()
	h.attempts[number] = a
	h.mu.Unlock()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		s.forwardLoop()
	}()
	return s
}

// start runs a built subtask. One that is gone (cancelled before it
// started) is reported exited, so that the coordinator stops waiting.
func (s *hostSession) start(k wireKey) {
	ht := s.tasks[k.task()]
	if ht == nil || ht.t.env.gen != k.gen || ht.started {
		s.h.send(&frame{kind: fExited, key: k, err: &TaskError{Operator: k.vertex, Subtask: k.subtask,
			Err: fmt.Errorf("task host: subtask was not deployed or was cancelled before it started: %w", context.Canceled)}})
		return
	}
	ht.started = true
	a := s.att
	a.taskWG.Add(1)
	go func() {
		defer a.taskWG.Done()
		t := ht.t
		err := t.run()
		// A subtask cancelled with a cause (a mail that could not be
		// decoded) failed with that cause.
		if cause := context.Cause(t.env.ctx); err != nil && errors.Is(err, context.Canceled) && cause != nil && !errors.Is(cause, context.Canceled) {
			err = &TaskError{Operator: t.env.v.describe(), Subtask: t.env.subtask, Err: cause}
		}
		ht.cancel(nil)
		a.inbox.Put(taskExitedMsg{sender: t.env.self(), err: err})
	}()
}

// mail hands a mail to its subtask (of the same generation).
func (s *hostSession) mail(f *frame) {
	ht := s.tasks[f.key.task()]
	if ht == nil || ht.t.env.gen != f.key.gen {
		return // a subtask replaced or gone: the coordinator drops what it says too
	}
	m := mail{kind: f.mail, id: f.id, stop: f.stop}
	v := ht.t.env.v
	switch f.mail {
	case mailAddSplits:
		splits, err := v.head().src.(wireSource).decodeSplits(f.splits)
		if err != nil {
			ht.cancel(fmt.Errorf("receive splits: %w", err))
			return
		}
		m.payload = splits
	case mailEvent:
		e, err := decodeEvent(v, f.event)
		if err != nil {
			ht.cancel(fmt.Errorf("receive source event: %w", err))
			return
		}
		m.payload = e
	case mailShutdown:
		// Only a finished attempt shuts its tasks down: their cancel is
		// then no failure.
		s.att.finishing.Store(true)
	}
	ht.t.env.post(m)
}

// cancelTask cancels a running subtask, or closes one built but not
// started.
func (s *hostSession) cancelTask(k wireKey) {
	ht := s.tasks[k.task()]
	if ht == nil || ht.t.env.gen != k.gen {
		return
	}
	if !ht.started {
		_ = ht.t.close()
		delete(s.tasks, k.task())
	}
	ht.cancel(context.Canceled)
}

// endSession cancels every subtask of the session and closes those not
// started; the forwarder sends their exits and ends.
func (s *hostSession) endSession() {
	select {
	case <-s.ended:
		return
	default:
	}
	close(s.ended)
	for k, ht := range s.tasks {
		if !ht.started {
			_ = ht.t.close()
			delete(s.tasks, k)
		}
	}
	s.att.cancel()
}

// forwardLoop sends what the session's tasks put into its inbox to the
// coordinator, until the session ended and its tasks exited. (It waits on
// ended, not on the context: tasks start only before ended closes.)
func (s *hostSession) forwardLoop() {
	a := s.att
	var buf []coordMsg
	forward := func() {
		buf = a.inbox.Drain(buf)
		for _, m := range buf {
			if f := s.frameOf(m); f != nil {
				s.h.send(f)
			}
		}
		clear(buf)
	}
	for {
		select {
		case <-a.inbox.Ready():
			forward()
		case <-s.ended:
			a.taskWG.Wait()
			forward()
			return
		}
	}
}

// frameOf is the wire form of a task's message to the coordinator.
func (s *hostSession) frameOf(m coordMsg) *frame {
	tm, ok := m.(taskMsg)
	if !ok {
		return nil
	}
	snd := tm.from()
	f := &frame{key: wireKey{s.att.number, snd.vertex, snd.subtask, snd.gen}}
	switch m := m.(type) {
	case splitRequestMsg:
		f.kind = fSplitRequest
	case readerEventMsg:
		f.kind = fReaderEvent
		f.event = m.event.(wireEvent)
	case ackMsg:
		f.kind, f.id, f.states = fAck, m.id, m.states
	case taskFinishedMsg:
		f.kind = fFinished
	case taskExitedMsg:
		f.kind, f.err = fExited, m.err
	case committedMsg:
		f.kind, f.upTo, f.committed = fCommitted, m.upTo, m.committed
	default:
		return nil
	}
	return f
}

// wireEvent is a reader's event to its enumerator, serialized on the
// reader's task goroutine (so that a failure fails that task).
type wireEvent []byte

// outboundEvent prepares an event a reader sends to its enumerator: as it
// is in the coordinator's process, serialized on a task host.
func (e *taskEnv) outboundEvent(ev source.Event) (source.Event, error) {
	if !e.att.hosted {
		return ev, nil
	}
	b, err := encodeEvent(e.v, ev)
	if err != nil {
		return nil, fmt.Errorf("send event to the enumerator: %w", err)
	}
	return wireEvent(b), nil
}
