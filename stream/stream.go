package stream

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/watermark"
)

// Environment collects a job's operators and settings. It is not safe for
// concurrent use; build the job on one goroutine, then Execute it.
type Environment struct {
	cfg     engine.Config
	graph   *engine.Graph
	ckptDir string
	retain  int
	// unaligned: sources with watermark alignment tolerate readers that
	// cannot pause single splits.
	unaligned bool
}

// Option configures an Environment; see the functions that return one. The
// style is franz-go's (an interface with an unexported method), used by
// every sluice package: options can only come from their package, and one
// value may configure several things.
type Option interface{ apply(*Environment) }

type optionFunc func(*Environment)

func (f optionFunc) apply(e *Environment) { f(e) }

// New returns an empty environment.
func New(opts ...Option) *Environment {
	e := &Environment{graph: engine.NewGraph()}
	for _, o := range opts {
		o.apply(e)
	}
	return e
}

// Parallelism sets the default parallelism of every operator (default 1).
func Parallelism(n int) Option { return optionFunc(func(e *Environment) { e.cfg.Parallelism = n }) }

// CheckpointEvery enables periodic checkpoints (default: off; a bounded job
// still commits its output with a final checkpoint at the end).
func CheckpointEvery(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.CheckpointInterval = d })
}

// CheckpointDir keeps completed checkpoints in a local directory (default:
// in memory, lost when the process ends). A job run holds an exclusive OS
// lock on the directory (<dir>/_lock, released by the kernel if the process
// dies), so a second run on it fails at once naming the holder's pid; and
// it records its job id there (<dir>/_job) before any task starts, so a job
// run again on the directory keeps its id (see checkpoint.Local).
func CheckpointDir(dir string) Option { return optionFunc(func(e *Environment) { e.ckptDir = dir }) }

// RetainCheckpoints keeps the newest n completed checkpoints in the
// checkpoint directory (default 3).
func RetainCheckpoints(n int) Option { return optionFunc(func(e *Environment) { e.retain = n }) }

// CheckpointStorage sets the checkpoint storage directly; it overrides
// CheckpointDir (default: in memory, or CheckpointDir's local directory).
func CheckpointStorage(s checkpoint.Storage) Option {
	return optionFunc(func(e *Environment) { e.cfg.Storage = s })
}

// CheckpointTimeout aborts checkpoints that take longer (default 10m).
func CheckpointTimeout(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.CheckpointTimeout = d })
}

// MinPauseBetweenCheckpoints sets the least time between the end of one
// checkpoint and the start of the next (default 0).
func MinPauseBetweenCheckpoints(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.MinPauseBetweenCheckpoints = d })
}

// TolerableCheckpointFailures lets n checkpoints in a row fail before the
// job fails (default 0: the first failed checkpoint fails the job, which
// then restarts per its strategy and aborts what the checkpoint prepared).
func TolerableCheckpointFailures(n int) Option {
	return optionFunc(func(e *Environment) { e.cfg.TolerableCheckpointFailures = n })
}

// Restart sets the restart strategy (default restart.None()).
func Restart(s restart.Strategy) Option {
	return optionFunc(func(e *Environment) { e.cfg.Restart = s })
}

// Failover sets the failover strategy (default FailoverRegion:
// only the failed task's region restarts when subtasks exchange no records;
// FailoverFull always restarts the whole job).
func Failover(f FailoverMode) Option { return optionFunc(func(e *Environment) { e.cfg.Failover = f }) }

// BatchSize sets the number of records per batch between tasks (default
// 1024).
func BatchSize(n int) Option { return optionFunc(func(e *Environment) { e.cfg.BatchSize = n }) }

// ChannelCapacity sets how many batches may wait between two subtasks
// before the sender blocks (default 4).
func ChannelCapacity(n int) Option {
	return optionFunc(func(e *Environment) { e.cfg.ChannelCapacity = n })
}

// BufferTimeout sends partially filled batches after d (default 100ms).
func BufferTimeout(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.BufferTimeout = d })
}

// WatermarkInterval sets the period of watermark generation (default
// 200ms).
func WatermarkInterval(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.WatermarkInterval = d })
}

// AllowUnalignedSourceSplits lets every source with watermark alignment
// (watermark.Strategy.WithWatermarkAlignment) run even if its readers hold
// several splits but cannot pause one of them (source.SplitPauser); such
// readers are then aligned per subtask only. Without it such a reader fails
// the job, with an error naming the source. It is Flink's
// pipeline.watermark-alignment.allow-unaligned-source-splits (default
// off); watermark.Strategy.WithUnalignedSourceSplits sets it for one
// source.
func AllowUnalignedSourceSplits() Option {
	return optionFunc(func(e *Environment) { e.unaligned = true })
}

// DisableChaining runs every operator in a task of its own (default:
// operators connected one-to-one share a task).
func DisableChaining() Option {
	return optionFunc(func(e *Environment) { e.cfg.DisableChaining = true })
}

// Logger sets the job's logger (default slog.Default()).
func Logger(l *slog.Logger) Option { return optionFunc(func(e *Environment) { e.cfg.Logger = l }) }

// Metrics sets the registry that receives the job's metrics (default: a
// new one, returned in the Result).
func Metrics(r *metrics.Registry) Option {
	return optionFunc(func(e *Environment) { e.cfg.Metrics = r })
}

// RestoreFrom starts the job from a checkpoint or savepoint (default: a
// fresh start). State in it
// that matches no operator's uid fails Build (ErrUnmatchedState),
// naming the unmatched uids and the job's operators, unless
// AllowNonRestoredState is set. To resume from the newest completed
// checkpoint of a directory, load it with checkpoint.LoadLatest, which
// refuses (checkpoint.ErrDamaged) rather than fall back past a damaged
// one.
func RestoreFrom(s *checkpoint.Snapshot) Option {
	return optionFunc(func(e *Environment) { e.cfg.RestoreFrom = s })
}

// AllowNonRestoredState lets a job restored with RestoreFrom drop, with a
// warning in the log, state that matches no operator (default: such state
// fails the restore). It is Flink's --allowNonRestoredState.
func AllowNonRestoredState() Option {
	return optionFunc(func(e *Environment) { e.cfg.AllowNonRestoredState = true })
}

// JobID sets the job's id (default: the id stored in the snapshot the job
// is restored from, or a new random one). Sinks derive external names such
// as Kafka transactional ids from it; see the job id notes in the package doc.
func JobID(id string) Option { return optionFunc(func(e *Environment) { e.cfg.JobID = id }) }

// Placement runs the job's subtasks on the task hosts p lists, one
// failover region per host by the engine's placement rule (default: every
// subtask in this process). It is how `sluice node` spreads a job over the
// nodes of a cluster (a control.Server of internal/cluster/control is the
// Placement); see docs/cluster.md.
func Placement(p engine.Placement) Option {
	return optionFunc(func(e *Environment) { e.cfg.Placement = p })
}

// LostHostWait sets how long a region whose task host was lost waits for
// a task host to link (the lost node restarted, or another) before it
// restarts on the hosts that remain (default 0: at once). Only jobs with a
// Placement have hosts to lose; see engine.Config.LostHostWait.
func LostHostWait(d time.Duration) Option {
	return optionFunc(func(e *Environment) { e.cfg.LostHostWait = d })
}

// Network sets the record exchange of the job's process: with it and a
// Placement, a job with a KeyBy or Rebalance edge spreads its forward
// chains over the hosts, and channels between subtasks on different hosts
// go over gRPC (give such edges an EdgeCodec). Every task host's job needs
// one too (default: none; no edge crosses hosts).
func Network(n *engine.Network) Option {
	return optionFunc(func(e *Environment) { e.cfg.Network = n })
}

// OpOption configures one operator; see the functions that return one.
type OpOption interface{ applyOp(*opConfig) }

type opOptionFunc func(*opConfig)

func (f opOptionFunc) applyOp(c *opConfig) { f(c) }

type opConfig struct {
	name        string
	uid         string
	parallelism int
	noChain     bool
	newChain    bool
}

func opts(o []OpOption) opConfig {
	var c opConfig
	for _, f := range o {
		f.applyOp(&c)
	}
	return c
}

func (c opConfig) apply(n *engine.Node) {
	if c.parallelism != 0 {
		n.SetParallelism(c.parallelism)
	}
	if c.noChain {
		n.DisableChaining()
	}
	if c.newChain {
		n.StartNewChain()
	}
	if c.uid != "" {
		n.SetUID(c.uid)
	}
}

// Name names the operator. Names label metrics and logs and, unless UID
// sets another id, key checkpoint state; they must be unique, and stable
// across versions of a job when no UID is set (default: kind and position,
// e.g. "operator-3").
func Name(name string) OpOption { return opOptionFunc(func(c *opConfig) { c.name = name }) }

// UID sets the operator's stable id, Flink's uid (default: its name).
// Checkpoint state is stored and restored under the uid, so an operator
// whose name changes between versions of a job keeps its state if its uid
// stays. Uids must be unique in a job.
func UID(uid string) OpOption { return opOptionFunc(func(c *opConfig) { c.uid = uid }) }

// WithParallelism sets the operator's parallelism (default: the job's).
func WithParallelism(n int) OpOption { return opOptionFunc(func(c *opConfig) { c.parallelism = n }) }

// NoChaining keeps the operator in a task of its own (default: chained
// with its one-to-one neighbours unless DisableChaining is set).
func NoChaining() OpOption { return opOptionFunc(func(c *opConfig) { c.noChain = true }) }

// StartNewChain starts a new chain at the operator, Flink's
// startNewChain (default: chained with its one-to-one neighbours): it runs
// in another task than its input, which hands it records in batches
// through a bounded channel (ChannelCapacity, BatchSize) with watermarks
// and checkpoint barriers in line, so the two run on two goroutines — two
// cores — per subtask; the operators after it still chain with it.
func StartNewChain() OpOption { return opOptionFunc(func(c *opConfig) { c.newChain = true }) }

// DataStream is a typed stream of records in a job under construction.
//
// A DataStream may feed several operators (call Map, SinkTo… on it more
// than once): each gets every record. That is how a side output is built
// (Flink's OutputTag): an operator emits a tagged value, and one consumer
// per tag keeps its share, e.g. good records to the main sink and failed
// ones to a dead-letter sink. Every sink of a job takes part in the same
// checkpoints, so the outputs together are exactly once.
type DataStream[T any] struct {
	env   *Environment
	node  *engine.Node
	part  engine.Partitioning
	expl  bool
	hash  any
	codec any // exchange.Codec[T] of the edge to the next operator, or nil
}

// FromSource starts a stream at a source. ws assigns event timestamps and
// watermarks (watermark.None[T]() for none) and may align the source's
// watermarks with other sources (watermark.Strategy.WithWatermarkAlignment).
func FromSource[T any, S source.Split, E any](env *Environment, src source.Source[T, S, E], ws watermark.Strategy[T], name string, o ...OpOption) DataStream[T] {
	if env.unaligned {
		ws = ws.WithUnalignedSourceSplits()
	}
	n := engine.SourceNode(env.graph, name, src, ws)
	opts(o).apply(n)
	return DataStream[T]{env: env, node: n}
}

func connect[T, U any](in DataStream[T], n *engine.Node, c opConfig) DataStream[U] {
	c.apply(n)
	in.env.graph.Connect(in.node, n, in.part, in.expl, in.hash)
	if in.codec != nil {
		// The codec's type is T by construction (EdgeOption[T]).
		_ = in.env.graph.SetEdgeCodec(in.node, n, in.codec)
	}
	return DataStream[U]{env: in.env, node: n}
}

// Map applies fn to every record.
func Map[T, U any](in DataStream[T], fn func(T) U, o ...OpOption) DataStream[U] {
	c := opts(o)
	return connect[T, U](in, engine.MapNode(in.env.graph, c.name, fn), c)
}

// TryMap applies fn to every record. An error from fn fails the task: the
// job fails or restarts per its strategy, with an error naming the operator.
func TryMap[T, U any](in DataStream[T], fn func(T) (U, error), o ...OpOption) DataStream[U] {
	c := opts(o)
	return connect[T, U](in, engine.TryMapNode(in.env.graph, c.name, fn), c)
}

// TryFilter keeps the records for which fn returns true; an error from fn
// fails the task like TryMap's.
func TryFilter[T any](in DataStream[T], fn func(T) (bool, error), o ...OpOption) DataStream[T] {
	c := opts(o)
	return connect[T, T](in, engine.TryFilterNode(in.env.graph, c.name, fn), c)
}

// Filter keeps the records for which fn returns true.
func Filter[T any](in DataStream[T], fn func(T) bool, o ...OpOption) DataStream[T] {
	c := opts(o)
	return connect[T, T](in, engine.FilterNode(in.env.graph, c.name, fn), c)
}

// FlatMap calls fn for every record; fn emits zero or more records.
func FlatMap[T, U any](in DataStream[T], fn func(v T, emit func(U)), o ...OpOption) DataStream[U] {
	c := opts(o)
	return connect[T, U](in, engine.FlatMapNode(in.env.graph, c.name, fn), c)
}

// Rebalance spreads the records round-robin over the next operator's
// subtasks.
func Rebalance[T any](in DataStream[T], o ...EdgeOption[T]) DataStream[T] {
	in.part, in.expl, in.hash = engine.Rebalance, true, nil
	return withEdgeOptions(in, o)
}

// Forward sends subtask i's records to subtask i of the next operator; it
// needs equal parallelism (otherwise the runtime rebalances).
func Forward[T any](in DataStream[T]) DataStream[T] {
	in.part, in.expl, in.hash, in.codec = engine.Forward, false, nil, nil
	return in
}

// KeyBy sends all records with the same key to the same subtask of the
// next operator.
//
// The subtask of a key depends only on the key's value (not on the
// process), so producers on different nodes agree.
func KeyBy[T any, K comparable](in DataStream[T], key func(T) K, o ...EdgeOption[T]) DataStream[T] {
	in.part, in.expl, in.hash = engine.Hash, true, engine.HashOf(key)
	return withEdgeOptions(in, o)
}

// EdgeOption configures the edge that KeyBy or Rebalance makes; see
// EdgeCodec.
type EdgeOption[T any] struct{ codec exchange.Codec[T] }

// EdgeCodec encodes the records of a KeyBy or Rebalance edge when its
// subtasks run on different nodes (a job placed over several task hosts
// with a record exchange; see docs/cluster.md). Such an edge without a
// codec fails the job at placement with an error naming the edge; in one
// process the codec is not used. Each record is framed with s's version,
// so nodes of a newer build still read it.
func EdgeCodec[T any](s serde.Versioned[T]) EdgeOption[T] {
	return EdgeOption[T]{codec: exchange.FromVersioned(s)}
}

// EdgeCodecFuncs is EdgeCodec from two functions: appendTo appends v's
// encoding to dst, decode reverses it (b is not reused: the record may
// refer to it). Cheaper than a serde.Versioned on hot edges.
func EdgeCodecFuncs[T any](appendTo func(dst []byte, v T) ([]byte, error), decode func(b []byte) (T, error)) EdgeOption[T] {
	return EdgeOption[T]{codec: exchange.CodecFuncs[T]{AppendFunc: appendTo, DecodeFunc: decode}}
}

func withEdgeOptions[T any](in DataStream[T], o []EdgeOption[T]) DataStream[T] {
	in.codec = nil
	for _, e := range o {
		if e.codec != nil {
			in.codec = e.codec
		}
	}
	return in
}

// SinkTo ends the stream at a sink. Two-phase sinks must be built with
// sink.NewTwoPhase (connectors do that for you).
func SinkTo[T any](in DataStream[T], s sink.Sink[T], name string, o ...OpOption) {
	n := engine.SinkNode(in.env.graph, name, s)
	connect[T, struct{}](in, n, opts(o))
}

// Build validates the environment's graph and plans the job without
// running it.
func (e *Environment) Build(name string) (*Job, error) {
	cfg := e.cfg
	if cfg.Storage == nil && e.ckptDir != "" {
		var opts []checkpoint.Option
		if e.retain > 0 {
			opts = append(opts, checkpoint.Retain(e.retain))
		}
		st, err := checkpoint.NewLocal(e.ckptDir, opts...)
		if err != nil {
			return nil, err
		}
		cfg.Storage = st
	}
	return engine.NewJob(name, e.graph, cfg)
}

// Execute runs the job until it finishes, fails, or ctx is cancelled.
func (e *Environment) Execute(ctx context.Context, name string) (*Result, error) {
	j, err := e.Build(name)
	if err != nil {
		return nil, err
	}
	return j.Run(ctx)
}

// Start runs the job in the background and returns its handle.
func (e *Environment) Start(ctx context.Context, name string) (*Handle, error) {
	j, err := e.Build(name)
	if err != nil {
		return nil, err
	}
	return j.Start(ctx), nil
}
