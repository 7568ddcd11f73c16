package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
)

// Config holds the settings of a job. The stream package fills it from its
// options; the zero value of each field means its documented default.
type Config struct {
	// Parallelism is the default parallelism of operators (default 1).
	Parallelism int
	// CheckpointInterval is the time between periodic checkpoints; 0
	// disables them (a bounded job still takes a final checkpoint to
	// commit its output).
	CheckpointInterval time.Duration
	// CheckpointTimeout aborts a checkpoint that takes longer (default 10m).
	CheckpointTimeout time.Duration
	// MinPauseBetweenCheckpoints is the least time from the end of one
	// checkpoint to the start of the next (default 0).
	MinPauseBetweenCheckpoints time.Duration
	// TolerableCheckpointFailures is how many checkpoints may fail in a row
	// before the job fails and restarts (default 0, as in Flink).
	TolerableCheckpointFailures int
	// Storage keeps completed checkpoints (default: in memory).
	Storage checkpoint.Storage
	// Restart is the restart strategy (default restart.None()). Regional
	// and global restarts both count against it.
	Restart restart.Strategy
	// Failover is the failover strategy (default FailoverRegion: restart
	// only the failed task's region when the job has several).
	Failover Failover
	// BatchSize is the number of records per batch between tasks
	// (default 1024).
	BatchSize int
	// ChannelCapacity is the number of batches a channel between two
	// subtasks holds before the sender waits (default 4).
	ChannelCapacity int
	// BufferTimeout sends partial batches after this long (default 100ms).
	BufferTimeout time.Duration
	// WatermarkInterval is the period of watermark generation (default
	// 200ms).
	WatermarkInterval time.Duration
	// DisableChaining runs every operator in a task of its own.
	DisableChaining bool
	// Logger receives the job's log (default slog.Default()).
	Logger *slog.Logger
	// Metrics receives the job's metrics (default: a new registry).
	Metrics *metrics.Registry
	// RestoreFrom is a checkpoint or savepoint to start from. State in it
	// that matches no operator of the job (by uid, see Node.UID) makes
	// NewJob fail with an error wrapping ErrUnmatchedState, unless
	// AllowNonRestoredState is set.
	RestoreFrom *checkpoint.Snapshot
	// AllowNonRestoredState drops (and logs) state in RestoreFrom that
	// matches no operator instead of failing (default false), like Flink's
	// --allowNonRestoredState.
	AllowNonRestoredState bool
	// JobID identifies the job across restarts and restores (see
	// sink.InitContext.JobID). Default: the id stored in RestoreFrom, or a
	// new random id when the job starts from scratch. Setting it for a job
	// restored from a snapshot of another id is an error.
	//
	// A Storage that keeps the job id itself (JobStorage, as
	// checkpoint.Local does in <dir>/_job) provides the default when the
	// job does not start from a snapshot, so a job run again on the same
	// checkpoint directory after a crash before its first checkpoint keeps
	// its id; a storage that records another id than the job's is refused.
	JobID string
	// Placement lists the task hosts the job's subtasks may run on
	// (default: all in this process). The engine places each failover
	// region on one host (see Placement and docs/cluster.md), or with a
	// Network each forward chain.
	Placement Placement
	// MoveInterval is the least time between two moves of a running
	// region onto a task host with fewer (default 30s; negative: no
	// moves). When a checkpoint completes and a live host of the
	// Placement runs more than ceil(regions/live hosts) regions, the
	// engine restarts one of them from that checkpoint on the live host
	// that runs the fewest: a host that linked after the attempt started
	// gets work (see planMove and docs/cluster.md).
	MoveInterval time.Duration
	// LostHostWait is how long a region whose task host was lost (its
	// subtasks failed with ErrHostLost) waits for a task host to link
	// before it restarts on the hosts that remain (default 0: at once).
	// A host that links within the wait — the lost node restarted, or
	// another — has no regions, so the least-loaded rule places the
	// region there; after the wait the region restarts on the remaining
	// hosts as with 0. Flink's equivalent is waiting for the lost
	// TaskManager's slots (slot.request.timeout).
	LostHostWait time.Duration
	// Network carries records between subtasks on different task hosts
	// (default: none, and no edge crosses hosts). With a Network and a
	// Placement, a job with a rebalance or hash edge spreads over its
	// hosts: such an edge then needs a record codec (Graph.SetEdgeCodec).
	// The task hosts' jobs (ServeTasks) need one too.
	Network *Network
	// RemoteErrors are sentinel errors that keep their identity (errors.Is)
	// when a subtask on another task host fails with them, besides the
	// engine's own (see RemoteError). They are matched by their text.
	RemoteErrors []error
}

// JobStorage is implemented by checkpoint storages that belong to one job
// (checkpoint.Local). The runtime holds Lock for the whole of Job.Run, so
// two runs never share the storage, and records the job's id with SetJobID
// before any task starts; JobID provides the id of a job started again on
// the storage.
type JobStorage interface {
	checkpoint.Storage
	// Lock takes an exclusive lock on the storage or fails at once naming
	// who holds it.
	Lock() (unlock func(), err error)
	// JobID returns the recorded job id, or "" if none is recorded.
	JobID() (string, error)
	// SetJobID records the job's id; it fails if another id is recorded.
	SetJobID(id string) error
}

var _ JobStorage = (*checkpoint.Local)(nil)

// ErrUnmatchedState is wrapped by NewJob's error when the snapshot to
// restore holds state of operators the job does not have (by uid).
var ErrUnmatchedState = errors.New("snapshot holds state that matches no operator")

// JobIDProperty is the snapshot property that holds the job's id.
const JobIDProperty = "job.id"

// NewJobID returns a new random job id: 16 lowercase hex digits.
func NewJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func (c *Config) setDefaults() {
	if c.Parallelism == 0 {
		c.Parallelism = 1
	}
	if c.CheckpointTimeout == 0 {
		c.CheckpointTimeout = 10 * time.Minute
	}
	if c.Storage == nil {
		c.Storage = checkpoint.NewMemory()
	}
	if c.Restart == nil {
		c.Restart = restart.None()
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1024
	}
	if c.ChannelCapacity == 0 {
		c.ChannelCapacity = 4
	}
	if c.BufferTimeout == 0 {
		c.BufferTimeout = 100 * time.Millisecond
	}
	if c.MoveInterval == 0 {
		c.MoveInterval = 30 * time.Second
	}
	if c.WatermarkInterval == 0 {
		c.WatermarkInterval = 200 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
}

func (c *Config) validate() error {
	var errs []error
	if c.CheckpointInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: checkpoint interval %s is negative", ErrInvalidJob, c.CheckpointInterval))
	}
	if c.BatchSize < 1 || c.ChannelCapacity < 1 {
		errs = append(errs, fmt.Errorf("%w: batch size (%d) and channel capacity (%d) must be at least 1", ErrInvalidJob, c.BatchSize, c.ChannelCapacity))
	}
	if c.TolerableCheckpointFailures < 0 {
		errs = append(errs, fmt.Errorf("%w: tolerable checkpoint failures %d is negative", ErrInvalidJob, c.TolerableCheckpointFailures))
	}
	return errors.Join(errs...)
}

// DiscardLogger is a logger that drops everything, for tests and
// benchmarks.
func DiscardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Job is a planned job graph, ready to run once.
type Job struct {
	name       string
	id         string
	runID      string // this run's id (RunID); a task host's view has its coordinator's
	cfg        Config
	vertices   []*vertex
	storage    checkpoint.Storage
	log        *slog.Logger
	metricRoot metrics.Group

	mu               sync.Mutex
	latest           *checkpoint.Snapshot
	nextCheckpointID int64
	stats            *checkpointStats
	restarts         int
	failures         []error
	regions          [][]taskKey     // failover regions
	regionOf         map[taskKey]int // region of each subtask
	chains           [][]taskKey     // forward chains: the placement units with a Network
	chainOf          map[taskKey]int
	attempts         int // attempt numbers handed out (global and regional)
	failureCount     int // failures so far, for the restart strategy
	state            State
	stoppedBy        bool // finished because Stop was called

	// beforeTrigger runs on the coordinator goroutine right before a
	// checkpoint's enumerator snapshots (tests only).
	beforeTrigger func(id int64)

	// stopC is closed by Stop; each attempt's coordinator watches it.
	stopC    chan struct{}
	stopOnce sync.Once
	// spC carries savepoint requests to the running attempt.
	spC chan *savepointReq
}

// NewJob validates the graph and the configuration and plans the job. A bad
// definition is rejected with an error wrapping ErrInvalidJob that says what
// to fix.
func NewJob(name string, g *Graph, cfg Config) (*Job, error) {
	cfg.setDefaults()
	if name == "" {
		return nil, fmt.Errorf("%w: the job needs a name", ErrInvalidJob)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	vs, err := g.plan(cfg.Parallelism, !cfg.DisableChaining)
	if err != nil {
		return nil, err
	}
	j := &Job{name: name, cfg: cfg, vertices: vs, storage: cfg.Storage, nextCheckpointID: 1, stopC: make(chan struct{}), spC: make(chan *savepointReq),
		log: cfg.Logger.With("job", name), metricRoot: cfg.Metrics.Root().With("job", name)}
	j.stats = newCheckpointStats(j.metricRoot)
	j.regions, j.regionOf, j.chains, j.chainOf = planUnits(vs)
	j.id = cfg.JobID
	if cfg.RestoreFrom != nil {
		j.latest = cfg.RestoreFrom
		j.nextCheckpointID = cfg.RestoreFrom.ID + 1
		if restored := cfg.RestoreFrom.Properties[JobIDProperty]; restored != "" {
			if j.id != "" && j.id != restored {
				return nil, fmt.Errorf("%w: job id %q was set, but the snapshot to restore (id %d) is of job id %q", ErrInvalidJob, j.id, cfg.RestoreFrom.ID, restored)
			}
			j.id = restored
		}
	}
	if js, ok := cfg.Storage.(JobStorage); ok {
		recorded, err := js.JobID()
		if err != nil {
			return nil, fmt.Errorf("checkpoint storage: %w", err)
		}
		switch {
		case recorded == "":
		case j.id == "":
			j.id = recorded // started again on its own storage
		case j.id != recorded:
			return nil, fmt.Errorf("%w: the checkpoint storage belongs to job id %s, but this job's id is %s (set or restored from the snapshot): %w; use another checkpoint directory",
				ErrInvalidJob, recorded, j.id, checkpoint.ErrOtherJob)
		}
	}
	if j.id == "" {
		j.id = NewJobID()
	}
	j.runID = NewJobID()
	if cfg.RestoreFrom != nil {
		if err := j.matchState(cfg.RestoreFrom); err != nil {
			return nil, err
		}
	}
	// Checkpoint ids keep growing across runs that share a storage, so a
	// resumed job never reuses the id (and the derived external names) of
	// an earlier run's checkpoint.
	infos, err := cfg.Storage.List(context.Background())
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	newest := int64(-1) // the storage's newest completed checkpoint
	for _, in := range infos {
		j.nextCheckpointID = max(j.nextCheckpointID, in.ID+1)
		if in.Kind == checkpoint.Checkpoint {
			newest = max(newest, in.ID)
		}
	}
	// A completed checkpoint whose _metadata is gone is not listed, but
	// its id was used: the directory's record of the latest one counts.
	if l, ok := cfg.Storage.(*checkpoint.Local); ok {
		if id, ok, err := checkpoint.LatestCompleted(l.Dir()); err == nil && ok {
			j.nextCheckpointID = max(j.nextCheckpointID, id+1)
			newest = max(newest, id)
		}
	}
	if r := cfg.RestoreFrom; r != nil && r.ID < newest {
		// An explicit choice (the newest may be damaged), but not a free
		// one: sinks committed the output of the newer checkpoints.
		j.log.Warn("restoring an older snapshot than the newest completed checkpoint in the job's checkpoint storage: output committed after it may be written again (duplicates)",
			"restoring", fmt.Sprintf("%s %d", r.Kind, r.ID), "newest_completed", newest)
	}
	return j, nil
}

// planUnits returns the job's failover regions and its forward chains.
func planUnits(vs []*vertex) (regions [][]taskKey, regionOf map[taskKey]int, chains [][]taskKey, chainOf map[taskKey]int) {
	regions, regionOf = computeRegions(vs, false)
	chains, chainOf = computeRegions(vs, true)
	return regions, regionOf, chains, chainOf
}

// matchState checks that every operator state in snap belongs to an
// operator of the job, by uid. Unmatched state fails the restore unless
// AllowNonRestoredState is set; then it is dropped and logged.
func (j *Job) matchState(snap *checkpoint.Snapshot) error {
	have := map[string]bool{}
	var ops []string
	for _, v := range j.vertices {
		for _, n := range v.nodes {
			if n.kind == kindSource || n.kind == kindSink {
				have[n.UID()] = true
				ops = append(ops, fmt.Sprintf("%s %q (uid %q)", [...]string{"source", "operator", "sink"}[n.kind], n.name, n.UID()))
			}
		}
	}
	seen := map[string]bool{}
	var unmatched []string
	note := func(uid string) {
		if !have[uid] && !seen[uid] {
			seen[uid] = true
			unmatched = append(unmatched, strconv.Quote(uid))
		}
	}
	for uid := range snap.Enumerators {
		note(uid)
	}
	for _, ts := range snap.Tasks {
		note(strings.TrimSuffix(ts.Vertex, globalSuffix))
	}
	if len(unmatched) == 0 {
		return nil
	}
	slices.Sort(unmatched)
	if j.cfg.AllowNonRestoredState {
		j.log.Warn("dropping state of operators this job does not have (non-restored state allowed)",
			"checkpoint", snap.ID, "dropped", strings.Join(unmatched, ", "), "operators", strings.Join(ops, ", "))
		return nil
	}
	return fmt.Errorf("%w: restore from %s %d: %w: the state of operator uids %s matches no operator of this job (its stateful operators: %s); "+
		"give renamed operators their old uid, or drop that state on purpose with AllowNonRestoredState (CLI: --allow-non-restored-state)",
		ErrInvalidJob, snap.Kind, snap.ID, ErrUnmatchedState, strings.Join(unmatched, ", "), strings.Join(ops, ", "))
}

// ID returns the job's id (see Config.JobID).
func (j *Job) ID() string { return j.id }

// RunID returns the id of this run of the job: new (random) for every Job,
// the same for all its attempts, and on a task host (ServeTasks) the id of
// the coordinator's run. It tells the processes of one run apart from
// another run of the same job id (a restarted process, another cluster
// leader's term, a copy run elsewhere). Sinks read it from their
// InitContext where it has a RunID() string method (the Kafka sink's
// transactional-id prefix lease: the processes of one run share it).
func (j *Job) RunID() string { return j.runID }

// State is a job's state.
type State string

const (
	Created    State = "CREATED"
	Running    State = "RUNNING"
	Restarting State = "RESTARTING"
	Finished   State = "FINISHED"
	Failed     State = "FAILED"
	Cancelled  State = "CANCELED"
)

// Result describes a job that ended.
type Result struct {
	JobName     string
	JobID       string
	State       State
	Duration    time.Duration
	Restarts    int
	Failures    []error // the cause of each restart, in order
	Checkpoints CheckpointStats
	Metrics     *metrics.Registry
	// Stopped says the job finished because Stop was called; its last
	// checkpoint (Checkpoints.LastID) marks where the output ends.
	Stopped bool
}

// Counter sums a counter over all subtasks whose labels match (key, value
// pairs), e.g. r.Counter(metrics.NumRecordsIn, "operator", "orders").
func (r *Result) Counter(name string, match ...string) int64 { return r.Metrics.Sum(name, match...) }

// Run runs the job until it finishes, fails beyond its restart strategy, or
// ctx is cancelled. A failure restarts the failed region or the whole job
// from its latest completed checkpoint, as often as the restart strategy
// allows.
func (j *Job) Run(ctx context.Context) (*Result, error) {
	start := time.Now()
	if js, ok := j.storage.(JobStorage); ok {
		unlock, err := js.Lock()
		if err != nil {
			j.setState(Failed)
			return j.result(start), fmt.Errorf("job %q: %w", j.name, err)
		}
		defer unlock()
		// Recorded before any task starts: a crash from here on leaves the
		// id for the next run on this storage.
		if err := js.SetJobID(j.id); err != nil {
			j.setState(Failed)
			return j.result(start), fmt.Errorf("job %q: %w", j.name, err)
		}
	}
	j.log.Info("job starting", "job_id", j.id)
	j.metricRoot.Counter(metrics.NumRestarts) // exported as 0 before any restart
	var err error
	for global := 0; ; global++ {
		j.mu.Lock()
		restore := j.latest
		j.state = Running
		number := j.attempts
		j.attempts++
		j.mu.Unlock()
		a := newAttempt(j, number, restore)
		err = a.run(ctx)
		if err == nil {
			j.mu.Lock()
			j.state = Finished
			j.stoppedBy = a.sps.stopping
			j.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			j.setState(Cancelled)
			err = fmt.Errorf("job %q cancelled: %w", j.name, ctx.Err())
			break
		}
		if errors.Is(err, errStoppedStarting) {
			j.setState(Cancelled)
			j.log.Warn("stop requested while the job was starting; cancelled instead of taking a final checkpoint (nothing of this run was committed; resume from the latest checkpoint)")
			err = fmt.Errorf("job %q: %w", j.name, err)
			break
		}
		delay, again, restarted := j.nextRestart(err)
		if !again {
			j.setState(Failed)
			switch {
			case errors.Is(err, restart.ErrUnrecoverable):
				err = fmt.Errorf("job %q failed without restarting (the failure would repeat; %d restarts before): %w", j.name, restarted, err)
			case restarted > 0:
				err = fmt.Errorf("job %q failed after %d restarts (strategy %s): %w", j.name, restarted, j.cfg.Restart, err)
			default:
				err = fmt.Errorf("job %q failed: %w", j.name, err)
			}
			break
		}
		j.setState(Restarting)
		j.log.Warn("job failed; restarting from the latest completed checkpoint", "restart", global+1, "delay", delay, "error", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			j.setState(Cancelled)
			return j.result(start), fmt.Errorf("job %q cancelled while restarting: %w", j.name, ctx.Err())
		case <-t.C:
		}
	}
	return j.result(start), err
}

// nextRestart asks the restart strategy about one more failure (global or
// regional; both count) and, if it allows a restart, records it. A cause
// wrapping restart.ErrUnrecoverable is never restarted. It also
// returns how many restarts there were before.
func (j *Job) nextRestart(cause error) (delay time.Duration, again bool, before int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	before = j.restarts
	if errors.Is(cause, restart.ErrUnrecoverable) {
		return 0, false, before
	}
	delay, again = j.cfg.Restart.Next(j.failureCount + 1)
	if !again {
		return delay, false, before
	}
	j.failureCount++
	j.restarts++
	j.failures = append(j.failures, cause)
	j.metricRoot.Counter(metrics.NumRestarts).Inc()
	return delay, true, before
}

func (j *Job) setState(s State) {
	j.mu.Lock()
	j.state = s
	j.mu.Unlock()
}

func (j *Job) result(start time.Time) *Result {
	j.mu.Lock()
	defer j.mu.Unlock()
	return &Result{JobName: j.name, JobID: j.id, State: j.state, Duration: time.Since(start), Restarts: j.restarts,
		Failures: append([]error(nil), j.failures...), Checkpoints: j.stats.get(), Metrics: j.cfg.Metrics, Stopped: j.stoppedBy}
}

// Status is a running job's state, safe to read from any goroutine.
type Status struct {
	Name        string
	State       State
	Restarts    int
	Checkpoints CheckpointStats
}

// Status returns the job's current state.
func (j *Job) Status() Status {
	j.mu.Lock()
	defer j.mu.Unlock()
	return Status{Name: j.name, State: j.state, Restarts: j.restarts, Checkpoints: j.stats.get()}
}

// Latest returns the latest completed checkpoint, or nil.
func (j *Job) Latest() *checkpoint.Snapshot {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.latest
}

// Handle controls a job started with Start.
type Handle struct {
	job    *Job
	cancel context.CancelFunc
	done   chan struct{}
	res    *Result
	err    error
}

// Start runs the job on a goroutine of its own. The caller must call Wait
// (or Cancel and Wait) to release it.
func (j *Job) Start(ctx context.Context) *Handle {
	ctx, cancel := context.WithCancel(ctx)
	h := &Handle{job: j, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(h.done)
		defer cancel()
		h.res, h.err = j.Run(ctx)
	}()
	return h
}

// Cancel stops the job. Output of checkpoints that completed stays
// committed; nothing else is committed.
func (h *Handle) Cancel() { h.cancel() }

// Stop ends the job cleanly: sources stop reading at the barrier of a final
// checkpoint, sinks prepare, the checkpoint is stored and committed, and the
// job finishes (Result.Stopped is set). Resuming from that checkpoint
// continues exactly where the committed output ends. Stop waits for the job
// to end or ctx to be done and returns the job's error.
func (h *Handle) Stop(ctx context.Context) (*Result, error) {
	h.job.stopOnce.Do(func() { close(h.job.stopC) })
	select {
	case <-h.done:
		return h.res, h.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Done is closed when the job has ended.
func (h *Handle) Done() <-chan struct{} { return h.done }

// Wait waits for the job to end and returns its result.
func (h *Handle) Wait() (*Result, error) {
	<-h.done
	return h.res, h.err
}

// Status returns the job's current state.
func (h *Handle) Status() Status { return h.job.Status() }

// Metrics returns the job's metrics registry.
func (h *Handle) Metrics() *metrics.Registry { return h.job.cfg.Metrics }

// Latest returns the job's latest completed checkpoint, or nil.
func (h *Handle) Latest() *checkpoint.Snapshot { return h.job.Latest() }

// CheckpointStats counts a job's checkpoints.
type CheckpointStats struct {
	Completed    int
	Failed       int
	LastID       int64
	LastDuration time.Duration
	LastSize     int64
	// Savepoints counts intermediate savepoints (a stop-with-savepoint is
	// the job's last completed checkpoint).
	Savepoints int
	// Recent holds the last RecentCheckpoints completed checkpoints and
	// savepoints as they completed, oldest first.
	Recent []CompletedCheckpoint
}

// RecentCheckpoints is how many completed checkpoints CheckpointStats.Recent
// keeps.
const RecentCheckpoints = 20

// CompletedCheckpoint is one completed checkpoint or savepoint.
type CompletedCheckpoint struct {
	ID        int64
	Kind      checkpoint.Kind
	Completed time.Time
	Duration  time.Duration
	Size      int64
}

type checkpointStats struct {
	mu                  sync.Mutex
	s                   CheckpointStats
	completedC, failedC *metrics.Counter
}

func newCheckpointStats(g metrics.Group) *checkpointStats {
	cs := &checkpointStats{completedC: g.Counter(metrics.NumberOfCompletedCheckpoints), failedC: g.Counter(metrics.NumberOfFailedCheckpoints)}
	g.Gauge(metrics.LastCheckpointDuration, func() int64 { return cs.get().LastDuration.Milliseconds() })
	g.Gauge(metrics.LastCheckpointSize, func() int64 { return cs.get().LastSize })
	return cs
}

func (c *checkpointStats) completed(cc CompletedCheckpoint) {
	c.mu.Lock()
	c.s.Completed++
	c.s.LastID, c.s.LastDuration, c.s.LastSize = cc.ID, cc.Duration, cc.Size
	c.remember(cc)
	c.mu.Unlock()
	c.completedC.Inc()
}

func (c *checkpointStats) savepoint(cc CompletedCheckpoint) {
	c.mu.Lock()
	c.s.Savepoints++
	c.remember(cc)
	c.mu.Unlock()
}

// remember appends cc to Recent, dropping the oldest beyond
// RecentCheckpoints. It copies, so that get's copies stay unchanged.
func (c *checkpointStats) remember(cc CompletedCheckpoint) {
	n := min(len(c.s.Recent), RecentCheckpoints-1)
	c.s.Recent = append(append(make([]CompletedCheckpoint, 0, n+1), c.s.Recent[len(c.s.Recent)-n:]...), cc)
}

func (c *checkpointStats) failed() {
	c.mu.Lock()
	c.s.Failed++
	c.mu.Unlock()
	c.failedC.Inc()
}

func (c *checkpointStats) get() CheckpointStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// redistribute maps a snapshot's task states onto the job's subtasks, by
// operator uid (Node.UID). With an unchanged parallelism every subtask gets its own state
// back; otherwise splits, writer states and committables are spread
// round-robin over the new subtasks (each carries its own progress).
func redistribute(vs []*vertex, snap *checkpoint.Snapshot) (map[taskKey]map[string]*checkpoint.TaskState, error) {
	out := map[taskKey]map[string]*checkpoint.TaskState{}
	if snap == nil {
		return out, nil
	}
	byNode := map[string][]checkpoint.TaskState{}
	for _, ts := range snap.Tasks {
		byNode[ts.Vertex] = append(byNode[ts.Vertex], ts)
	}
	put := func(v *vertex, i int, name string, st *checkpoint.TaskState) {
		k := taskKey{v.id, i}
		if out[k] == nil {
			out[k] = map[string]*checkpoint.TaskState{}
		}
		out[k][name] = st
	}
	for _, v := range vs {
		for _, n := range v.nodes {
			uid := n.UID()
			old := byNode[uid]
			if len(old) == 0 {
				continue
			}
			same := len(old) == v.parallelism
			for _, st := range old {
				if st.Parallelism != v.parallelism || st.Subtask < 0 || st.Subtask >= v.parallelism {
					same = false
				}
			}
			if same {
				for i := range old {
					st := old[i]
					put(v, st.Subtask, uid, &st)
				}
				continue
			}
			merged := make([]*checkpoint.TaskState, v.parallelism)
			for i := range merged {
				merged[i] = &checkpoint.TaskState{Vertex: uid, Subtask: i, Parallelism: v.parallelism, Parts: map[string][][]byte{}}
				put(v, i, uid, merged[i])
			}
			next := map[string]int{}
			for _, st := range old {
				for part, blobs := range st.Parts {
					for _, b := range blobs {
						i := next[part] % v.parallelism
						next[part]++
						merged[i].Parts[part] = append(merged[i].Parts[part], b)
					}
				}
			}
		}
	}
	return out, nil
}
