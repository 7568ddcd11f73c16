package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/internal/cluster/node"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/httpstatus"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
)

// Placement across nodes (docs/cluster.md, "Subtasks on several nodes"):
// a leader with --node-addr serves the other nodes' links with a
// control.Server, which is its job's Placement; every other node builds
// the same pipeline's job and serves the leader's subtasks on a link
// (workFor), until the leader changes.

// controlOptions are the control channel's options of o: mutual TLS with
// the node's files when --tls-* are given.
func controlOptions(o nodeOptions, log *slog.Logger) []control.Option {
	opts := []control.Option{control.WithLogger(log)}
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsCA != "" {
		opts = append(opts, control.WithTLSFiles(o.tlsCert, o.tlsKey, o.tlsCA))
	}
	return opts
}

// startControl listens on --node-listen and serves the other nodes' links
// there until stop, which ends every link and waits.
func startControl(o nodeOptions, log *slog.Logger) (srv *control.Server, stop func(), err error) {
	srv, err = control.NewServer(controlOptions(o, log)...)
	if err != nil {
		return nil, nil, fmt.Errorf("node: control server: %w", err)
	}
	lis, err := net.Listen("tcp", o.listen)
	if err != nil {
		return nil, nil, fmt.Errorf("node: listen for the other nodes' links on %s (--node-listen/--node-addr): %w", o.listen, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(lis); err != nil {
			log.Error("node: control server stopped", "error", err)
		}
	}()
	log.Info("serving the other nodes' links", "listen", lis.Addr().String(), "addr", o.addr)
	return srv, func() {
		srv.Stop()
		<-done
	}, nil
}

// awaitLinks waits, at most --link-wait, until every other live member
// and at least --expect-nodes − 1 workers linked to srv, so that the first
// attempt spreads over them; it logs those that did not (they get work at
// the next placement).
func awaitLinks(ctx context.Context, srv *control.Server, t node.Term, o nodeOptions, log *slog.Logger) {
	if t.Members == nil || o.linkWait <= 0 {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, o.linkWait)
	defer cancel()
	var want []string
	members, err := t.Members(wctx)
	if err != nil {
		log.Warn("cannot read the members to wait for their links; starting with those linked", "error", err)
		return
	}
	for _, m := range members {
		if m.ID != o.nodeID {
			want = append(want, m.ID)
		}
	}
	n := max(len(want), o.expectNodes-1)
	if n == 0 {
		return
	}
	err = srv.WaitWorkers(wctx, n)
	linked := srv.Workers()
	var missing []string
	for _, id := range want {
		if !slices.Contains(linked, id) {
			missing = append(missing, id)
		}
	}
	switch {
	case err == nil && len(missing) == 0:
		log.Info("the members linked", "workers", linked)
	case ctx.Err() != nil:
	default:
		log.Warn("not every member linked within --link-wait; starting with those linked", "linked", linked, "missing", missing, "expect_nodes", o.expectNodes, "link_wait", o.linkWait)
	}
}

// workFor runs this node's share of leader l's job: it builds the
// pipeline's job, links to the leader and serves the subtasks the leader
// places here until the link breaks or ctx ends (the leader changed).
// Meanwhile the node's endpoint (ep, if any) adds their metrics to its
// /metrics.
func (a *App) workFor(ctx context.Context, spec *pipeline.Spec, o nodeOptions, l node.Leader, log *slog.Logger, sec secretRefs, ep *node.Endpoint, xnet *engine.Network) error {
	reg := metrics.NewRegistry()
	if ep != nil {
		// The subtasks this node runs count in reg: serve it on /metrics.
		defer ep.SetWorkerMetrics(func(w io.Writer) error { return httpstatus.WriteMetrics(w, reg.Snapshot()) })()
	}
	sopts := streamOptions(spec, runOptions{}, log, reg, nil, nil, sec)
	copts := controlOptions(o, log)
	if xnet != nil {
		sopts = append(sopts, stream.Network(xnet))
		copts = append(copts, control.WithExchangeAddr(xnet.Addr))
		reg.Root().Gauge(NumRecordsFromOtherNodes, xnet.RecordsReceived)
		defer logExchange(xnet, log, "worker")()
	}
	env := stream.New(sopts...)
	if err := a.build(env, spec, log, reg); err != nil {
		return err
	}
	j, err := env.Build(spec.Name)
	if err != nil {
		return fmt.Errorf("build the job to serve the leader's subtasks: %w", err)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	conn, err := control.Dial(dctx, l.Addr, o.nodeID, copts...)
	cancel()
	if err != nil {
		return fmt.Errorf("link to the leader %s at %s: %w", l.ID, l.Addr, err)
	}
	log.Info("linked to the leader; serving its subtasks", "leader", l.ID, "term", l.Term, "addr", l.Addr)
	err = j.ServeTasks(ctx, conn)
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("the link ended")
	}
	return fmt.Errorf("serving the leader %s's subtasks: %w", l.ID, err)
}
