package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/s3"
	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
	"github.com/sluice-io/sluice/internal/cluster/node"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
)

// nodeOptions are the flags of node.
type nodeOptions struct {
	etcd         string
	nodeID       string
	addr         string
	prefix       string
	leaseTTL     time.Duration
	cert         string
	key          string
	ca           string
	logLevel     string
	logFormat    string
	httpAddr     string
	httpTokenEnv string
	tlsCert      string
	tlsKey       string
	tlsCA        string
	savepointDir string
	from         string
	listen       string
	linkWait     time.Duration
	lostNodeWait time.Duration
	expectNodes  int
	// exchangeListen and exchangeAddr are where the node's record exchange
	// listens and is reached (nodeexchange.go).
	exchangeListen string
	exchangeAddr   string
}

// cmdNode runs one node of a cluster (docs/cluster.md): it joins through
// etcd, campaigns, runs the job's coordinator while it leads (placing
// subtasks on the other nodes with --node-addr) and the leader's subtasks
// placed on it while another node leads.
func (a *App) cmdNode(args []string) int {
	var o nodeOptions
	fs := a.nodeFlags(&o)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return a.exit(usageError{err})
	}
	if len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	if o.etcd == "" {
		return a.exit(usagef("node: --cluster-etcd is required"))
	}
	spec, err := pipeline.Load(pos[0], a.Registry, a.Getenv)
	if err != nil {
		return a.exit(loadError(err))
	}
	if err := o.complete(spec); err != nil {
		return a.exit(err)
	}
	a = a.redacted(pipeline.NewRedactor(a.withTokenSecret(spec.Secrets, o.httpTokenEnv)))
	ro := runOptions{logLevel: o.logLevel, logFormat: o.logFormat, progress: "off"}
	log, err := a.runLogger(&ro)
	if err != nil {
		return a.exit(err)
	}
	for _, w := range spec.Warnings {
		log.Warn(w)
	}
	sec := secretRefs{vals: secretVars(spec.Secrets)}
	sec.lookup = secretLookup(sec.vals, a.Getenv)

	nm, ep, nodeTLS, stopOps, err := a.startNodeOps(spec, &o, log)
	if err != nil {
		return a.exit(err)
	}
	defer stopOps()
	xnet, err := startExchange(spec, o, log)
	if err != nil {
		return a.exit(err)
	}
	defer closeExchange(xnet, log)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigDone := make(chan struct{})
	go func() {
		defer close(sigDone)
		select {
		case <-a.Signals:
			log.Info("signal: stopping the node (a leader cancels its job; output stays committed up to the last published checkpoint)")
			cancel()
		case <-ctx.Done():
		}
	}()
	log.Info("node starting", "node", o.nodeID, "etcd", o.etcd, "prefix", o.prefix, "lease_ttl", o.leaseTTL)
	err = node.Run(ctx, node.Config{
		NodeID:     o.nodeID,
		Addr:       o.addr,
		Logger:     log,
		PauseLimit: o.leaseTTL / 2,
		NewJobID:   fromJobID(o, log),
		Metrics:    nm,
		TLS:        nodeTLS,
		Connect:    etcdConnect(o),
		Lead: func(ctx context.Context, t node.Term) error {
			return a.leadJob(ctx, spec, o, t, log, sec, ep, xnet)
		},
		Work: func(ctx context.Context, l node.Leader) error {
			return a.workFor(ctx, spec, o, l, log, sec, ep, xnet)
		},
	})
	cancel()
	<-sigDone
	return a.exit(err)
}

// withTokenSecret is secrets with the token held by the environment
// variable tokenEnv, if it is set: values never shown.
func (a *App) withTokenSecret(secrets []pipeline.Substitution, tokenEnv string) []pipeline.Substitution {
	if tokenEnv != "" {
		if tok, ok := a.Getenv(tokenEnv); ok {
			secrets = append(slices.Clip(secrets), pipeline.Substitution{Var: tokenEnv, Value: tok, Secret: true})
		}
	}
	return secrets
}

// etcdConnect opens a session with the etcd cluster of --cluster-etcd
// (node.Config.Connect).
func etcdConnect(o nodeOptions) func(context.Context) (coord.Coordinator, error) {
	eopts := []etcdcoord.Option{etcdcoord.WithLeaseTTL(o.leaseTTL), etcdcoord.WithPrefix(o.prefix)}
	if o.cert != "" || o.key != "" || o.ca != "" {
		eopts = append(eopts, etcdcoord.WithTLSFiles(o.cert, o.key, o.ca))
	}
	endpoints := strings.Split(o.etcd, ",")
	return func(ctx context.Context) (coord.Coordinator, error) {
		return etcdcoord.New(ctx, endpoints, eopts...)
	}
}

// fromJobID makes the job id a first leader records (node.Config.NewJobID):
// with --from, the id the snapshot records, so that the restored job keeps
// its external names (the Kafka sink's transactional ids, whose prepared
// transactions the restore commits) and the engine accepts the snapshot.
// It reads the snapshot only then (--from is ignored once a checkpoint is
// published, and may be gone by then); a snapshot that cannot be read or
// records no id gets a new id (the leader's restore from --from then
// reports the fault).
func fromJobID(o nodeOptions, log *slog.Logger) func() string {
	return func() string {
		if o.from != "" {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			s, _, err := loadRestoreEncoded(ctx, o.from)
			switch {
			case err != nil:
				log.Error("--from: cannot read the snapshot's job id; recording a new one", "from", o.from, "error", err)
			case s.Properties[stream.JobIDProperty] != "":
				id := s.Properties[stream.JobIDProperty]
				log.Info("--from: the job runs under the snapshot's job id", "from", o.from, "job_id", id)
				return id
			}
		}
		return stream.NewJobID()
	}
}

// complete checks the pipeline for node mode and fills in the defaults
// that depend on it and on the host.
func (o *nodeOptions) complete(spec *pipeline.Spec) error {
	if spec.CheckpointDir == "" {
		return usagef("%s: node: checkpoint.dir is required: a directory every node can reach (a shared file system or s3://), where each leader writes its checkpoints", spec.File)
	}
	if o.nodeID == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			return usagef("node: --node-id is required (no host name: %v)", err)
		}
		o.nodeID = h
	}
	if err := (coord.Member{ID: o.nodeID, Addr: o.addr}).Validate(); err != nil {
		return usagef("node: --node-id: %v", err)
	}
	if o.leaseTTL <= 0 {
		return usagef("node: --lease-ttl %v: must be positive", o.leaseTTL)
	}
	if o.prefix == "" {
		o.prefix = "/sluice/" + spec.Name + "/"
	}
	if o.listen == "" {
		o.listen = o.addr
	}
	if o.listen != "" && o.addr == "" {
		return usagef("node: --node-listen needs --node-addr (the address the other nodes dial)")
	}
	if o.linkWait < 0 {
		return usagef("node: --link-wait %v: must not be negative", o.linkWait)
	}
	if o.lostNodeWait < 0 {
		return usagef("node: --lost-node-wait %v: must not be negative", o.lostNodeWait)
	}
	if o.expectNodes < 1 {
		return usagef("node: --expect-nodes %d: must be at least 1", o.expectNodes)
	}
	return o.completeExchange(spec)
}

// nodeFlags defines node's flags into o.
func (a *App) nodeFlags(o *nodeOptions) *flag.FlagSet {
	fs := a.newFlags("node", "node --cluster-etcd HOST:PORT[,...] [flags] PIPELINE.yaml")
	fs.StringVar(&o.etcd, "cluster-etcd", "", "etcd endpoints, comma-separated (required)")
	fs.StringVar(&o.nodeID, "node-id", "", "this node's id, unique in the cluster (default: the host name)")
	fs.StringVar(&o.addr, "node-addr", "", "the address (host:port) other nodes reach this node at, announced in membership: while it leads, the node serves the other nodes' links there and places subtasks on them; without it a leader runs its whole job alone")
	fs.StringVar(&o.listen, "node-listen", "", "the address the leader listens on for the other nodes' links (default: --node-addr), e.g. :7070 behind a --node-addr of pod-0.sluice:7070")
	fs.DurationVar(&o.linkWait, "link-wait", 10*time.Second, "how long a new leader with --node-addr waits for the other live members (and --expect-nodes) to link before it starts its job's first attempt (those that link later get work at the next placement)")
	fs.StringVar(&o.exchangeListen, "exchange-listen", "", "with key_by or rebalance steps: the address the node's record exchange listens on for the records other nodes send its subtasks (default: the host of --node-listen, or of --node-addr, with port 0: any free port)")
	fs.StringVar(&o.exchangeAddr, "exchange-addr", "", "the address (host:port) other nodes reach the record exchange at (default: the host of --node-addr with the port --exchange-listen got)")
	fs.DurationVar(&o.lostNodeWait, "lost-node-wait", 0, "with --node-addr: how long the subtasks of a worker that was lost wait for a node to link (the lost one restarted, or another) before they restart on the nodes that remain (0: at once)")
	fs.IntVar(&o.expectNodes, "expect-nodes", 1, "the number of nodes (the leader included) a new leader waits for, at most --link-wait, before its job's first attempt; it always waits for the live members")
	fs.StringVar(&o.prefix, "cluster-prefix", "", "etcd key prefix of this job's cluster (default /sluice/<job name>/)")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 10*time.Second, "how long after a node stops renewing its etcd lease (crash, pause, partition) it loses membership and leadership")
	fs.StringVar(&o.cert, "etcd-cert", "", "client certificate (PEM) for mutual TLS to etcd")
	fs.StringVar(&o.key, "etcd-key", "", "client key (PEM) for mutual TLS to etcd")
	fs.StringVar(&o.ca, "etcd-ca", "", "CA bundle (PEM) that signed the etcd servers' certificates")
	fs.StringVar(&o.httpAddr, "http", "", "serve this node's /healthz, /readyz, /metrics and /status on this address (\":9249\" = 127.0.0.1:9249), with its job's while it leads; overrides the pipeline's http.listen")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "this node's certificate (PEM) for node-to-node mutual TLS; also used for etcd without --etcd-cert")
	fs.StringVar(&o.tlsKey, "tls-key", "", "the key (PEM) of --tls-cert")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "CA bundle (PEM) that signed every node's certificate")
	fs.StringVar(&o.savepointDir, "savepoint-dir", "", "enable POST /savepoints on the leader's HTTP endpoint, writing savepoints here (a directory every node can reach; needs a token)")
	fs.StringVar(&o.from, "from", "", "start the job from this savepoint or checkpoint when the cluster has published no checkpoint yet (a new --cluster-prefix); ignored once one is published")
	fs.StringVar(&o.httpTokenEnv, "http-token-env", "", "require the bearer token held by this environment variable on the HTTP endpoint")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	return fs
}

// termDirPrefix names a leader's checkpoint directory under
// checkpoint.dir: term-<term>.
const termDirPrefix = "term-"

// termDir is the checkpoint directory of the leader of term under base.
func termDir(base string, term int64) string {
	name := termDirPrefix + strconv.FormatInt(term, 10)
	if isS3(base) {
		return strings.TrimSuffix(base, "/") + "/" + name
	}
	return filepath.Join(base, name)
}

// leadJob runs the whole job while this node leads term t: checkpoints go
// to checkpoint.dir/term-<term> and are completed by the fenced write of
// their pointer; the job restores from the published pointer only (or,
// before any is published, from --from). While it runs, the node's HTTP
// endpoint (ep, when --http or http.listen is set) serves its metrics,
// status, readiness and, with --savepoint-dir, POST /savepoints.
func (a *App) leadJob(ctx context.Context, spec *pipeline.Spec, o nodeOptions, t node.Term, log *slog.Logger, sec secretRefs, ep *node.Endpoint, xnet *engine.Network) error {
	store, dir, err := termStorage(spec, t, log)
	if err != nil {
		return err
	}
	var restore *checkpoint.Snapshot
	if p := t.Restore; p != nil {
		s, info, err := loadRestore(ctx, p.Location, sec.lookup)
		if err != nil {
			return fmt.Errorf("restoring the published checkpoint %d (term %d): %w", p.ID, p.Term, err)
		}
		if s.ID != p.ID || s.Kind != checkpoint.Checkpoint {
			return fmt.Errorf("the published pointer names checkpoint %d at %s, but %s %d is there", p.ID, p.Location, s.Kind, s.ID)
		}
		log.Info("restoring", "from", info.Path, "id", info.ID)
		restore = s
	} else if o.from != "" {
		s, info, err := loadRestore(ctx, o.from, sec.lookup)
		if err != nil {
			return err
		}
		log.Info("no checkpoint published: starting from --from", "from", info.Path, "kind", s.Kind, "id", info.ID)
		restore = s
	}
	reg := metrics.NewRegistry()
	opts := append(streamOptions(spec, runOptions{}, log, reg, store, restore, sec), stream.JobID(t.JobID))
	var srv *control.Server
	if o.addr != "" {
		s, stop, err := startControl(o, log)
		if err != nil {
			return err
		}
		defer stop()
		srv = s
		opts = append(opts, stream.Placement(srv), stream.LostHostWait(o.lostNodeWait))
		if xnet != nil {
			opts = append(opts, stream.Network(xnet))
			defer logExchange(xnet, log, "leader")()
			reg.Root().Gauge(NumRecordsFromOtherNodes, xnet.RecordsReceived)
		}
	}
	env := stream.New(opts...)
	if err := a.build(env, spec, log, reg); err != nil {
		return usageError{err}
	}
	var job runningJob
	clearJob, err := a.serveNodeJob(ep, spec, o, log, reg, &job)
	if err != nil {
		return err
	}
	defer clearJob()
	if srv != nil {
		awaitLinks(ctx, srv, t, o, log)
	}
	j, err := env.Build(spec.Name)
	if err != nil {
		return usageError{err}
	}
	start := time.Now()
	h := j.Start(ctx)
	job.set(jobstat.New(h, spec.Source.Name, spec.Sink.Name, start), h)
	log.Info("job running on the leader", "term", t.Leadership.Term(), "job_id", t.JobID, "checkpoints", dir, "run_id", j.RunID())
	select {
	case <-h.Done():
	case <-ctx.Done():
		h.Cancel()
	}
	res, err := h.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	log.Info("job ended", "state", res.State, "checkpoints", res.Checkpoints.Completed)
	return nil
}

// termStorage is the checkpoint storage of term t: checkpoint.dir/term-<t>,
// wrapped in node.Storage (publish, then retention).
func termStorage(spec *pipeline.Spec, t node.Term, log *slog.Logger) (checkpoint.Storage, string, error) {
	term := t.Leadership.Term()
	dir := termDir(spec.CheckpointDir, term)
	var inner checkpoint.Storage
	if isS3(dir) {
		// node.Storage prunes after each publish; no S3 lock: each term
		// has its own prefix, and etcd fences the writers.
		st, _, err := s3Storage(dir, 0, spec.CheckpointOptions, s3.NoLock())
		if err != nil {
			return nil, "", fmt.Errorf("%s: checkpoint.dir: %w", spec.File, err)
		}
		inner = st
	} else {
		st, err := checkpoint.NewLocal(dir, checkpoint.Retain(0))
		if err != nil {
			return nil, "", fmt.Errorf("%s: checkpoint.dir: %w", spec.File, err)
		}
		inner = st
	}
	sopts := []node.StorageOption{node.Retain(checkpointRetain(spec)), node.WithLogger(log)}
	if !isS3(dir) {
		sopts = append(sopts, node.OnFirstPublish(func(_ context.Context, p coord.CheckpointPointer) {
			removeOldTerms(spec.CheckpointDir, term, log)
		}))
	}
	return node.NewStorage(inner, t, sopts...), dir, nil
}

// removeOldTerms deletes the checkpoint directories of terms before term:
// once this term published a checkpoint, the pointer never names them
// again. A fenced old leader still writing there leaves at most debris.
func removeOldTerms(base string, term int64, log *slog.Logger) {
	entries, err := os.ReadDir(base)
	if err != nil {
		log.Warn("cleaning up earlier terms' checkpoints", "dir", base, "error", err)
		return
	}
	for _, e := range entries {
		n, ok := strings.CutPrefix(e.Name(), termDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if old, perr := strconv.ParseInt(n, 10, 64); perr == nil && old < term {
			if err := os.RemoveAll(filepath.Join(base, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				log.Warn("cleaning up an earlier term's checkpoints", "dir", filepath.Join(base, e.Name()), "error", err)
			}
		}
	}
}
