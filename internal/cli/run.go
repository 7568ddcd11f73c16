package cli

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cliui"
	"github.com/sluice-io/sluice/internal/cluster/exchange/clicodec"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/httpstatus"
	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/internal/transform"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// runOptions are the flags of run (and demo).
type runOptions struct {
	from             string
	httpAddr         string
	httpTokenEnv     string
	progress         string
	interval         time.Duration
	logLevel         string
	logFormat        string
	savepointDir     string
	allowNonRestored bool
	// savepointRetain overrides http.savepoint-retain when > 0.
	savepointRetain int
}

func (a *App) runFlags(name, synopsis string, o *runOptions) *flag.FlagSet {
	fs := a.newFlags(name, synopsis)
	fs.StringVar(&o.httpAddr, "http", "", "serve /metrics and /status on this address (\":9249\" = 127.0.0.1:9249); overrides the pipeline's http.listen")
	fs.StringVar(&o.httpTokenEnv, "http-token-env", "", "require the bearer token held by this environment variable on the HTTP endpoint")
	fs.StringVar(&o.progress, "progress", "auto", "progress display: auto, terminal, plain or off")
	fs.DurationVar(&o.interval, "progress-interval", 0, "time between progress updates (default 1s on a terminal, 5s otherwise)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text (key=value lines) or json (one JSON object per line, for log shippers; the final summary is a JSON record too)")
	return fs
}

func (a *App) cmdRun(args []string) int {
	var o runOptions
	fs := a.runFlags("run", "run [flags] PIPELINE.yaml", &o)
	fs.StringVar(&o.from, "from", "", "resume from a checkpoint or savepoint directory, or from the newest checkpoint in a checkpoint directory")
	fs.BoolVar(&o.allowNonRestored, "allow-non-restored-state", false, "with --from: drop (and log) state that matches no operator of the pipeline instead of refusing to start")
	fs.StringVar(&o.savepointDir, "savepoint-dir", "", "on the first signal, stop with a savepoint written under this directory (instead of a final checkpoint)")
	fs.IntVar(&o.savepointRetain, "savepoint-retain", 0, "savepoints taken through POST /savepoints that are kept; older ones are deleted (default: http.savepoint-retain, 5)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return a.exit(usageError{err})
	}
	if len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	spec, err := pipeline.Load(pos[0], a.Registry, a.Getenv)
	if err != nil {
		return a.exit(loadError(err))
	}
	// From here on, values from the environment are hidden in everything
	// the process writes about the run: logs, errors, HTTP responses.
	secrets := spec.Secrets
	if o.httpTokenEnv != "" {
		if t, ok := a.Getenv(o.httpTokenEnv); ok {
			secrets = append(secrets, pipeline.Substitution{Var: o.httpTokenEnv, Value: t, Secret: true})
		}
	}
	a = a.redacted(pipeline.NewRedactor(secrets))
	out, err := a.runSpec(spec, o)
	if err != nil {
		return a.exit(err)
	}
	a.summarize(spec, out, pos[0])
	return out.exitCode()
}

// loadError makes every error of loading a pipeline a usage error (exit
// code 2): a missing or unreadable file as well as an invalid one.
func loadError(err error) error {
	if errors.Is(err, pipeline.ErrInvalid) {
		return err
	}
	return usageError{err}
}

// exitCode is 0 when the job finished or ended because a signal asked it
// to (stopped or cancelled), 1 when it failed.
func (o *outcome) exitCode() int {
	if o.err == nil || o.signalled && o.res != nil && o.res.State == engine.Cancelled {
		return ExitOK
	}
	return ExitFailed
}

func (a *App) cmdValidate(args []string) error {
	fs := a.newFlags("validate", "validate PIPELINE.yaml")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return usageError{err}
	}
	if len(pos) != 1 {
		return usagef("validate needs one pipeline file")
	}
	spec, err := pipeline.Load(pos[0], a.Registry, a.Getenv)
	if err != nil {
		return loadError(err)
	}
	a = a.redacted(pipeline.NewRedactor(spec.Secrets))
	for _, w := range spec.Warnings {
		fmt.Fprintln(a.Stderr, "warning:", w)
	}
	names := make([]string, 0, len(spec.Transforms)+2)
	names = append(names, "source "+spec.Source.Type)
	for _, t := range spec.Transforms {
		names = append(names, string(t.Kind))
	}
	names = append(names, "sink "+spec.Sink.Type)
	if spec.DeadLetter != nil {
		names[len(names)-1] += " (dead letters → sink " + spec.DeadLetter.Type + ")"
	}
	fmt.Fprintf(a.redact.Writer(a.Stdout), "%s: ok: job %q: %s (%s, parallelism %d)\n", pos[0], spec.Name, strings.Join(names, " → "), spec.Delivery, spec.Parallelism)
	return nil
}

// outcome is how a run ended.
type outcome struct {
	res       *engine.Result
	err       error  // the job's error
	signalled bool   // a signal asked the job to end
	stopped   bool   // ended by a clean stop (final checkpoint committed)
	savepoint string // where the stop's savepoint was written
	snap      jobstat.Snapshot
	// jsonLog is the run's logger when --log-format is json: the summary
	// is then one record of it.
	jsonLog *slog.Logger
}

// stopper is how a signal ends the job: engine.Handle.Stop takes a final
// checkpoint, commits it and ends the job; with --savepoint-dir the final
// checkpoint is a savepoint written there.
type stopper interface {
	Stop(ctx context.Context) (*engine.Result, error)
}

var _ stopper = (*engine.Handle)(nil)

// savepointStopper stops with a savepoint into dir and records its path.
type savepointStopper struct {
	h    *engine.Handle
	dir  string
	log  *slog.Logger
	path *string
}

func (s savepointStopper) Stop(ctx context.Context) (*engine.Result, error) {
	info, res, err := s.h.StopWithSavepoint(ctx, s.dir)
	if err != nil {
		s.log.Error("stop with savepoint failed; the job keeps running (signal again to cancel)", "dir", s.dir, "error", err)
		<-s.h.Done()
		return s.h.Wait()
	}
	*s.path = info.Path
	s.log.Info("savepoint written", "path", info.Path)
	return res, nil
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level: want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// loadRestore loads what --from names: a snapshot directory, its _metadata
// file, or a checkpoint directory (its newest completed snapshot). It never
// falls back past a completed checkpoint: if the newest one is damaged it
// fails, naming it, and tells the user how to choose an older one. The
// references to environment variables a snapshot holds instead of their
// values are replaced by the values lookup gives; a variable it does not
// know fails the load, naming it.
func loadRestore(ctx context.Context, from string, lookup func(string) (string, bool)) (*checkpoint.Snapshot, checkpoint.Info, error) {
	s, info, err := loadRestoreEncoded(ctx, from)
	if err != nil {
		return s, info, err
	}
	if err := decodeSnapshot(s, lookup); err != nil {
		return nil, info, fmt.Errorf("--from %s: %w", info.Path, err)
	}
	return s, info, nil
}

// loadRestoreEncoded is loadRestore without decoding.
func loadRestoreEncoded(ctx context.Context, from string) (*checkpoint.Snapshot, checkpoint.Info, error) {
	if isS3(from) {
		return s3Load(ctx, from, registry.Options{})
	}
	s, info, err := checkpoint.Load(ctx, from)
	if err == nil || !errors.Is(err, checkpoint.ErrNotFound) {
		return s, info, err
	}
	infos, lerr := checkpoint.ListDir(ctx, from)
	if lerr != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", from, lerr)
	}
	newest, ok, _, nerr := checkpoint.Newest(ctx, from)
	if nerr != nil {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", from, nerr)
	}
	// A savepoint newer than every checkpoint (say, of a stop with
	// --savepoint-dir into this directory) is the newest snapshot.
	var sp *checkpoint.Info
	for i := len(infos) - 1; i >= 0; i-- {
		if infos[i].Kind == checkpoint.Savepoint {
			sp = &infos[i]
			break
		}
	}
	if sp != nil && (!ok || sp.ID > newest) {
		if sp.Warning != nil {
			return nil, checkpoint.Info{}, fmt.Errorf("--from %s: the newest snapshot there, savepoint %d, is damaged: %w; name an older snapshot explicitly with --from DIR/chk-N or DIR/savepoint-N (it may duplicate output committed after it)", from, sp.ID, sp.Warning)
		}
		return checkpoint.Load(ctx, sp.Path)
	}
	if !ok {
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: no complete checkpoint or savepoint there: %w", from, checkpoint.ErrNotFound)
	}
	s, info, err = checkpoint.LoadLatest(ctx, from)
	if err == nil {
		return s, info, nil
	}
	if de, ok := errors.AsType[*checkpoint.DamagedError](err); ok {
		hint := "there is no older complete checkpoint to choose instead"
		for i := len(infos) - 1; i >= 0; i-- {
			if in := infos[i]; in.Kind == checkpoint.Checkpoint && in.ID < de.ID && in.Warning == nil {
				hint = fmt.Sprintf("to resume from an older checkpoint anyway, name it explicitly, e.g. --from %s (output committed after it may be written again)", in.Path)
				break
			}
		}
		return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w; %s", from, err, hint)
	}
	return nil, checkpoint.Info{}, fmt.Errorf("--from %s: %w", from, err)
}

// warnIfOlder warns when the snapshot restored from path is older than the
// newest completed checkpoint of the directory it lives in: output
// committed after it may be written again.
func warnIfOlder(ctx context.Context, log *slog.Logger, info checkpoint.Info) {
	parent := filepath.Dir(info.Path)
	newest, ok, _, err := checkpoint.Newest(ctx, parent)
	if err != nil || !ok || newest <= info.ID {
		return
	}
	log.Warn("restoring an older snapshot than the newest completed checkpoint in its directory: output committed after it may be written again (duplicates)",
		"restoring", info.Path, "newest_completed", newest, "dir", parent)
}

func restartStrategy(r pipeline.Restart) restart.Strategy {
	switch r.Strategy {
	case "none":
		return restart.None()
	case "exponential":
		return restart.Exponential(r.Delay, r.MaxDelay, r.Attempts)
	}
	return restart.FixedDelay(r.Attempts, r.Delay)
}

// runSpec runs a validated pipeline until it ends. Its error is about
// starting the job; how the job ended is in the outcome.
func (a *App) runSpec(spec *pipeline.Spec, o runOptions) (*outcome, error) {
	log, err := a.runLogger(&o)
	if err != nil {
		return nil, err
	}
	for _, w := range spec.Warnings {
		log.Warn(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// One run per checkpoint directory: the lock is taken before anything
	// else and held until the job has ended (the runtime takes it again,
	// counted, for its run).
	store, unlock, err := openStore(spec, func(err error) {
		// A lost s3:// lock: another run took the prefix over; this one
		// must not write on.
		log.Error("failing the job: it lost the checkpoint lock", "error", err)
		cancel()
	})
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Values from the environment never reach a checkpoint or savepoint:
	// the storage replaces them by references to their variables.
	sec := secretRefs{vals: secretVars(spec.Secrets)}
	sec.lookup = secretLookup(sec.vals, a.Getenv)
	restore, err := restorePoint(ctx, spec, o, log, sec)
	if err != nil {
		return nil, err
	}
	reg := metrics.NewRegistry()
	env := stream.New(streamOptions(spec, o, log, reg, store, restore, sec)...)
	if err := a.build(env, spec, log, reg); err != nil {
		return nil, usageError{err} // a connector rejected its configuration
	}
	var job runningJob // for the HTTP endpoint, once the job started
	stopHTTP, err := a.serveHTTP(spec, o, log, reg, &job)
	if err != nil {
		return nil, err
	}
	defer stopHTTP()

	start := time.Now()
	h, err := env.Start(ctx, spec.Name)
	if err != nil {
		return nil, usageError{err}
	}
	v := jobstat.New(h, spec.Source.Name, spec.Sink.Name, start)
	job.set(v, h)
	out := a.watch(ctx, h, v, o, log)
	if o.logFormat == "json" {
		out.jsonLog = log
	}
	return out, nil
}

// runLogger is the run's logger, as --log-level and --log-format ask. With
// JSON logs, progress is logged too rather than drawn on a terminal line.
func (a *App) runLogger(o *runOptions) (*slog.Logger, error) {
	level, err := parseLevel(o.logLevel)
	if err != nil {
		return nil, err
	}
	hopts := &slog.HandlerOptions{Level: level}
	switch o.logFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(a.Stderr, hopts)), nil
	case "json":
		if o.progress == "auto" || o.progress == "terminal" {
			o.progress = "plain" // progress as log records, not a rewritten line
		}
		return slog.New(slog.NewJSONHandler(a.Stderr, hopts)), nil
	}
	return nil, usagef("--log-format: want text or json, got %q", o.logFormat)
}

// openStore opens and locks the pipeline's checkpoint directory, if it has
// one; unlock releases it (a no-op without one).
func openStore(spec *pipeline.Spec, onLost func(error)) (store checkpoint.Storage, unlock func(), err error) {
	if err := s3CheckSettings(spec); err != nil {
		return nil, nil, err
	}
	if spec.CheckpointDir == "" {
		return nil, func() {}, nil
	}
	if isS3(spec.CheckpointDir) {
		return s3OpenStore(spec, onLost)
	}
	var sopts []checkpoint.Option
	if spec.CheckpointRetain > 0 {
		sopts = append(sopts, checkpoint.Retain(spec.CheckpointRetain))
	}
	st, err := checkpoint.NewLocal(spec.CheckpointDir, sopts...)
	if err != nil {
		return nil, nil, err
	}
	unlock, err = st.Lock()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: checkpoint.dir: %w", spec.File, err)
	}
	return st, unlock, nil
}

// restorePoint loads the snapshot --from names, if any. Without --from, a
// checkpoint directory that holds snapshots of an earlier run is refused
// (resuming is explicit); one that holds only _job (a run killed before
// its first checkpoint) starts again, with the recorded job id.
func restorePoint(ctx context.Context, spec *pipeline.Spec, o runOptions, log *slog.Logger, sec secretRefs) (*checkpoint.Snapshot, error) {
	if o.from != "" {
		load := loadRestore
		if isS3(o.from) {
			load = func(ctx context.Context, from string, lookup func(string) (string, bool)) (*checkpoint.Snapshot, checkpoint.Info, error) {
				return s3LoadRestore(ctx, spec, from, lookup)
			}
		}
		s, info, err := load(ctx, o.from, sec.lookup)
		if err != nil {
			return nil, usageError{err}
		}
		// The runtime warns about its own checkpoint dir when it is given
		// the checkpoint.Local itself, not the storage that keeps secrets
		// out of it.
		if abs, _ := filepath.Abs(spec.CheckpointDir); !isS3(info.Path) && (spec.CheckpointDir == "" || filepath.Dir(info.Path) != abs || len(sec.vals) > 0) {
			warnIfOlder(ctx, log, info)
		}
		if s.JobName != spec.Name {
			log.Warn("resuming a snapshot of another job name; state is matched by operator uid", "snapshot_job", s.JobName, "job", spec.Name)
		}
		log.Info("resuming", "from", info.Path, "kind", info.Kind, "id", info.ID)
		return s, nil
	}
	if spec.CheckpointDir == "" {
		return nil, nil
	}
	var infos []checkpoint.Info
	var newest int64
	var ok bool
	var err, nerr error
	if isS3(spec.CheckpointDir) {
		infos, newest, ok, _, nerr = s3ListSnapshots(ctx, spec.CheckpointDir, spec.CheckpointOptions)
	} else {
		infos, err = checkpoint.ListDir(ctx, spec.CheckpointDir)
		if err != nil {
			return nil, fmt.Errorf("%s: checkpoint.dir: %w", spec.File, err)
		}
		newest, ok, _, nerr = checkpoint.Newest(ctx, spec.CheckpointDir)
	}
	if nerr != nil {
		return nil, fmt.Errorf("%s: checkpoint.dir: %w", spec.File, nerr)
	}
	if len(infos) > 0 || ok {
		kind, id := checkpoint.Checkpoint, newest
		if len(infos) > 0 && (!ok || infos[len(infos)-1].ID > newest) {
			kind, id = infos[len(infos)-1].Kind, infos[len(infos)-1].ID
		}
		return nil, usagef("%s: checkpoint.dir %s holds snapshots of an earlier run (newest: %s %d); resume with `sluice run --from %s %s`, or use an empty directory",
			spec.File, spec.CheckpointDir, kind, id, spec.CheckpointDir, spec.File)
	}
	return nil, nil
}

// secretRefs are the values that came from the environment (by variable)
// and how to look a variable up again when a snapshot is decoded.
type secretRefs struct {
	vals   map[string]string
	lookup func(string) (string, bool)
}

// streamOptions are the job's options from the pipeline and the flags.
func streamOptions(spec *pipeline.Spec, o runOptions, log *slog.Logger, reg *metrics.Registry, store checkpoint.Storage, restore *checkpoint.Snapshot, sec secretRefs) []stream.Option {
	opts := []stream.Option{
		stream.Parallelism(spec.Parallelism),
		stream.CheckpointTimeout(spec.CheckpointTimeout),
		stream.Restart(restartStrategy(spec.Restart)),
		stream.Metrics(reg),
		stream.Logger(log),
	}
	if spec.CheckpointInterval > 0 {
		opts = append(opts, stream.CheckpointEvery(spec.CheckpointInterval))
	}
	if store != nil {
		opts = append(opts, stream.CheckpointStorage(withSecrets(store, sec.vals, sec.lookup)))
	} else if len(sec.vals) > 0 {
		// Savepoints are written through the storage too.
		opts = append(opts, stream.CheckpointStorage(withSecrets(checkpoint.NewMemory(), sec.vals, sec.lookup)))
	}
	if restore != nil {
		opts = append(opts, stream.RestoreFrom(restore))
		if o.allowNonRestored {
			opts = append(opts, stream.AllowNonRestoredState())
		}
	}
	return opts
}

// runningJob is the started job as the HTTP endpoint sees it: nothing
// until it started.
type runningJob struct {
	mu     sync.Mutex
	view   *jobstat.View
	handle *engine.Handle
}

func (r *runningJob) set(v *jobstat.View, h *engine.Handle) {
	r.mu.Lock()
	r.view, r.handle = v, h
	r.mu.Unlock()
}

func (r *runningJob) getView() *jobstat.View {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.view
}

func (r *runningJob) getHandle() *engine.Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handle
}

// serveHTTP starts the HTTP endpoint (/metrics, /status, and POST
// /savepoints with --savepoint-dir) if the pipeline or the flags ask for
// one; stop shuts it down.
func (a *App) serveHTTP(spec *pipeline.Spec, o runOptions, log *slog.Logger, reg *metrics.Registry, job *runningJob) (stop func(), err error) {
	addr, token := spec.HTTPListen, spec.HTTPToken
	if o.httpAddr != "" {
		addr = o.httpAddr
	}
	if o.httpTokenEnv != "" {
		t, ok := a.Getenv(o.httpTokenEnv)
		if !ok || t == "" {
			return nil, usagef("--http-token-env: environment variable %s is not set", o.httpTokenEnv)
		}
		token = t
	}
	if addr == "" {
		return func() {}, nil
	}
	hopts := []httpstatus.Option{httpstatus.Token(token), httpstatus.Logger(log), httpstatus.ReadyCheckpointAge(readyAge(spec))}
	if o.savepointDir != "" {
		if o.savepointRetain < 0 {
			return nil, usagef("--savepoint-retain: must be at least 1, got %d", o.savepointRetain)
		}
		if token == "" {
			return nil, usagef("--savepoint-dir with an HTTP endpoint enables POST /savepoints, which needs a token: set --http-token-env VAR (or http.token: ${VAR} in the pipeline)")
		}
		savepoint := func(ctx context.Context) (checkpoint.Info, error) {
			hd := job.getHandle()
			if hd == nil {
				return checkpoint.Info{}, errors.New("the job has not started")
			}
			return hd.TriggerSavepoint(ctx, o.savepointDir)
		}
		hopts = append(hopts, httpstatus.Savepoints(savepoint, cmp.Or(o.savepointRetain, spec.HTTPSavepointRetain), spec.CheckpointTimeout+time.Minute))
	}
	hnd, err := httpstatus.Handler(reg, job.getView, hopts...)
	if err != nil {
		return nil, err
	}
	srv, err := httpstatus.Start(addr, redactHTTP(a.redact, hnd))
	if err != nil {
		return nil, err
	}
	if !httpstatus.IsLoopback(srv.Addr()) && token == "" {
		log.Warn("the HTTP endpoint listens beyond loopback without a token", "addr", srv.Addr())
	}
	log.Info("http endpoint", "metrics", "http://"+srv.Addr()+"/metrics", "status", "http://"+srv.Addr()+"/status", "token", token != "")
	return func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Close(sctx)
	}, nil
}

// watch shows the job's progress until it ends. The first signal stops it
// cleanly (a final checkpoint, or a savepoint with --savepoint-dir), a
// second one cancels it.
func (a *App) watch(ctx context.Context, h *engine.Handle, v *jobstat.View, o runOptions, log *slog.Logger) *outcome {
	prog, interval := a.progress(o, log)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	out := &outcome{}
	var stopWG sync.WaitGroup
	defer stopWG.Wait()
	for done := false; !done; {
		select {
		case <-h.Done():
			done = true
		case <-tick.C:
			prog.Update(v.Poll(time.Now()))
		case <-a.Signals:
			prog.Done()
			if out.signalled {
				log.Warn("second signal: cancelling the job; output stays committed up to the last completed checkpoint")
				h.Cancel()
				continue
			}
			out.signalled = true
			var s stopper = h
			if o.savepointDir != "" {
				log.Info("stopping with a savepoint (signal again to cancel)", "dir", o.savepointDir)
				s = savepointStopper{h: h, dir: o.savepointDir, log: log, path: &out.savepoint}
			} else {
				log.Info("stopping: taking a final checkpoint (signal again to cancel)")
			}
			stopWG.Add(1)
			go func() {
				defer stopWG.Done()
				_, _ = s.Stop(ctx) // returns when the job ended; the result is read from Wait below
			}()
		}
	}
	out.res, out.err = h.Wait()
	out.snap = v.Poll(time.Now())
	prog.Update(out.snap)
	prog.Done()
	if out.res != nil && out.signalled && out.res.State == engine.Finished {
		out.stopped = true
	}
	return out
}

// readyAge is the bound of /readyz: http.ready-checkpoint-age, or else
// 3 × checkpoint.interval + checkpoint.timeout (0, no bound, without
// periodic checkpoints).
func readyAge(spec *pipeline.Spec) time.Duration {
	if spec.HTTPReadyCheckpointAge > 0 || spec.CheckpointInterval <= 0 {
		return spec.HTTPReadyCheckpointAge
	}
	return 3*spec.CheckpointInterval + spec.CheckpointTimeout
}

// progress picks the progress display.
func (a *App) progress(o runOptions, log *slog.Logger) (*cliui.Progress, time.Duration) {
	term := false
	switch o.progress {
	case "terminal":
		term = true
	case "auto":
		if a.Terminal != nil {
			term = *a.Terminal
		} else if f, ok := a.Stderr.(*os.File); ok {
			term = cliui.IsTerminal(f)
		}
	}
	iv := o.interval
	if iv <= 0 {
		iv = 5 * time.Second
		if term {
			iv = time.Second
		}
	}
	switch {
	case o.progress == "off":
		return nil, iv
	case term:
		return cliui.Terminal(a.Stderr), iv
	}
	return cliui.Plain(log), iv
}

// build adds the pipeline's operators to env.
func (a *App) build(env *stream.Environment, spec *pipeline.Spec, log *slog.Logger, reg *metrics.Registry) error {
	src, _ := a.Registry.Source(spec.Source.Type)
	snk, _ := a.Registry.Sink(spec.Sink.Type)
	steps := spec.Steps()
	in, err := src.Build(registry.BuildContext{Env: env, Name: spec.Source.Name, UID: spec.Source.UID, Options: spec.Source.Options,
		Delivery: spec.Delivery, Stdout: a.Stdout, Logger: log, DecodeValues: transform.DecodesValues(steps), LookupKeys: transform.LookupKeys(steps), ValuesReplaced: transform.ReplacesValue(steps),
		Positions: transform.NeedsPositions(steps) || transform.ReadsMeta(steps)})
	if err != nil {
		return fmt.Errorf("%s:%d: source: %w", spec.File, spec.Source.Line, err)
	}
	var dead stream.DataStream[registry.Record]
	var first []stream.OpOption // of the first operator after the source
	if spec.OwnSourceTask() {
		first = append(first, stream.StartNewChain())
	}
	codec := edgeCodec(spec, log)
	if transform.NeedsPolicies(steps, spec.SourceDeadLetters) || spec.DeadLetter != nil {
		in, dead = transform.AddWithPolicies(in, steps, transform.PolicyOptions{Metrics: reg, Logger: log, DeadLetters: spec.DeadLetter != nil, First: first, Codec: codec})
	} else {
		in = transform.AddToWith(in, steps, codec, first...)
	}
	if err := snk.Build(registry.BuildContext{Env: env, Name: spec.Sink.Name, UID: spec.Sink.UID, Options: spec.Sink.Options,
		Delivery: spec.Delivery, Stdout: a.Stdout, Logger: log, StepApplied: spec.SinkStep != nil,
		SinkOwnsRecords: len(spec.Transforms) == 0 && spec.DeadLetter == nil && !spec.SourceDeadLetters}, in); err != nil {
		return fmt.Errorf("%s:%d: sink: %w", spec.File, spec.Sink.Line, err)
	}
	if dl := spec.DeadLetter; dl != nil {
		dsk, _ := a.Registry.Sink(dl.Type)
		if err := dsk.Build(registry.BuildContext{Env: env, Name: dl.Name, UID: dl.UID, Options: dl.Options,
			Delivery: spec.Delivery, Stdout: a.Stdout, Logger: log}, dead); err != nil {
			return fmt.Errorf("%s:%d: dead-letter: %w", spec.File, dl.Line, err)
		}
	}
	return nil
}

// edgeCodec is the codec of the records of the pipeline's key_by and
// rebalance edges when they cross nodes (nil without such steps): records
// the source left undecoded travel as their bytes when the table built
// from the source's format options has their codec, others as values.
func edgeCodec(spec *pipeline.Spec, log *slog.Logger) transform.RecordCodec {
	if !slices.ContainsFunc(spec.Transforms, (*transform.Compiled).IsPartition) {
		return nil
	}
	table, err := registry.SourceCodecs(spec.Source.Options)
	if err != nil {
		// The source itself reports its formats' errors; records then
		// cross as values.
		log.Debug("no codec table for records between nodes", "error", err)
		return clicodec.New()
	}
	return clicodec.New(table)
}

// summarize prints how the run ended and how to resume.
func (a *App) summarize(spec *pipeline.Spec, out *outcome, file string) {
	w := a.Stderr
	s := out.snap
	state := "unknown"
	if out.res != nil {
		state = string(out.res.State)
	}
	last := int64(0)
	if s.Last != nil {
		last = s.Last.ID
	}
	if out.jsonLog != nil {
		a.summarizeJSON(spec, out, file, state, last)
		return
	}
	fmt.Fprintf(w, "job %q %s: %s records in, %s out, %d checkpoints, %d restarts, %s\n", spec.Name, state,
		cliui.Count(s.RecordsIn), cliui.Count(s.RecordsOut), s.Completed, s.Restarts, s.Uptime.Round(time.Millisecond))
	if line := errorCounts(spec, out.res); line != "" {
		fmt.Fprintln(w, line)
	}
	resume := func() {
		if spec.CheckpointDir == "" {
			fmt.Fprintln(w, "no checkpoint.dir is set, so this run cannot be resumed")
			return
		}
		fmt.Fprintf(w, "resume with: sluice run --from %s %s\n", spec.CheckpointDir, file)
	}
	switch {
	case out.stopped && out.savepoint != "":
		fmt.Fprintf(w, "stopped with savepoint %d: %s\n", last, out.savepoint)
		fmt.Fprintf(w, "resume with: sluice run --from %s %s\n", out.savepoint, file)
	case out.stopped:
		fmt.Fprintf(w, "stopped cleanly: output is committed up to the final checkpoint %d\n", last)
		resume()
	case out.signalled:
		fmt.Fprintf(w, "cancelled: output is committed up to checkpoint %d; nothing after it is visible\n", last)
		resume()
	case out.err != nil:
		fmt.Fprintf(w, "failed: %s\n", firstLine(out.err.Error()))
		if last > 0 {
			resume()
		}
	}
}

// errorCounts is the summary line of records with errors (skipped and
// dead-lettered by the transforms and the source), "" if there were none.
// Records replayed after a restart are counted again.
func errorCounts(spec *pipeline.Spec, res *engine.Result) string {
	skipped, dead := recordsWithErrors(spec, res)
	if skipped == 0 && dead == 0 {
		return ""
	}
	return fmt.Sprintf("records with errors: %s skipped, %s dead-lettered", cliui.Count(skipped), cliui.Count(dead))
}

// recordsWithErrors counts the records skipped and dead-lettered by the
// error policies of the transforms and the source.
func recordsWithErrors(spec *pipeline.Spec, res *engine.Result) (skipped, dead int64) {
	if res == nil || res.Metrics == nil {
		return 0, 0
	}
	skipped = res.Counter(transform.NumRecordsSkipped)
	dead = res.Counter(transform.NumRecordsDeadLettered)
	src := res.Counter(metrics.NumRecordsInErrors, "operator", spec.Source.Name)
	if spec.SourceDeadLetters {
		dead += src
	} else {
		skipped += src
	}
	return skipped, dead
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
