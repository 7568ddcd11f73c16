package cli

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/transform"
)

// Edges between nodes (docs/cluster.md, "Subtasks on several nodes"): a
// pipeline with a key_by or rebalance step, run by nodes with --node-addr,
// gets a record exchange per node (engine.ListenNetwork) for the whole
// life of the process. The leader's job and every worker's job use it
// (stream.Network), a worker announces its address on its link
// (control.WithExchangeAddr), and the records of those edges cross nodes
// in clicodec's encoding (run.go, edgeCodec), over mutual TLS with the
// --tls-* files when given.

// NumRecordsFromOtherNodes is the gauge of the records this node's
// subtasks received over the record exchange from subtasks on other
// nodes, since the node started (on the leader's and the workers'
// /metrics).
const NumRecordsFromOtherNodes = "numRecordsFromOtherNodes"

// needsExchange reports whether the node runs a record exchange: the
// pipeline has a key_by or rebalance step and the node takes part in
// placement (--node-addr).
func needsExchange(spec *pipeline.Spec, o nodeOptions) bool {
	return o.addr != "" && slices.ContainsFunc(spec.Transforms, (*transform.Compiled).IsPartition)
}

// completeExchange checks --exchange-listen and --exchange-addr and fills
// in the listen default: the host of --node-listen (or --node-addr) with
// port 0.
func (o *nodeOptions) completeExchange(spec *pipeline.Spec) error {
	if !needsExchange(spec, *o) {
		if o.exchangeListen != "" || o.exchangeAddr != "" {
			return usagef("node: --exchange-listen/--exchange-addr need --node-addr and a pipeline with a key_by or rebalance step")
		}
		return nil
	}
	if o.exchangeListen == "" {
		host, _, err := net.SplitHostPort(o.listen)
		if err != nil {
			return usagef("node: --node-listen %q: %v", o.listen, err)
		}
		o.exchangeListen = net.JoinHostPort(host, "0")
	}
	if _, _, err := net.SplitHostPort(o.exchangeListen); err != nil {
		return usagef("node: --exchange-listen %q: %v", o.exchangeListen, err)
	}
	if o.exchangeAddr != "" {
		if _, port, err := net.SplitHostPort(o.exchangeAddr); err != nil || port == "0" || port == "" {
			return usagef("node: --exchange-addr %q: want host:port with a port other nodes can dial", o.exchangeAddr)
		}
	}
	return nil
}

// startExchange starts the node's record exchange when it needs one
// (nil otherwise).
func startExchange(spec *pipeline.Spec, o nodeOptions, log *slog.Logger) (*engine.Network, error) {
	if !needsExchange(spec, o) {
		return nil, nil
	}
	xopts := []exchange.Option{exchange.WithLogger(log)}
	if o.tlsCert != "" || o.tlsKey != "" || o.tlsCA != "" {
		xopts = append(xopts, exchange.WithTLSFiles(o.tlsCert, o.tlsKey, o.tlsCA))
	}
	n, err := engine.ListenNetwork(o.exchangeListen, "", xopts...)
	if err != nil {
		return nil, fmt.Errorf("node: --exchange-listen: %w", err)
	}
	if o.exchangeAddr != "" {
		n.Addr = o.exchangeAddr
	} else {
		// The listener's port on --node-addr's host.
		_, port, err := net.SplitHostPort(n.Addr)
		host, _, herr := net.SplitHostPort(o.addr)
		if err != nil || herr != nil {
			_ = n.Close()
			return nil, usagef("node: cannot derive --exchange-addr from --node-addr %q and the listener %q; set --exchange-addr", o.addr, n.Addr)
		}
		if _, perr := strconv.Atoi(port); perr != nil {
			_ = n.Close()
			return nil, usagef("node: cannot derive --exchange-addr: listener port %q", port)
		}
		n.Addr = net.JoinHostPort(host, port)
	}
	log.Info("record exchange listening", "listen", o.exchangeListen, "addr", n.Addr, "tls", o.tlsCert != "")
	return n, nil
}

// closeExchange closes the node's record exchange (after its jobs ended),
// logging how many records it received.
func closeExchange(n *engine.Network, log *slog.Logger) {
	if n == nil {
		return
	}
	log.Info("record exchange closed", "records_from_other_nodes", n.RecordsReceived())
	if err := n.Close(); err != nil {
		log.Warn("closing the record exchange", "error", err)
	}
}

// logExchange logs, when the returned func is called (a term's end), how
// many records the node received from other nodes so far.
func logExchange(n *engine.Network, log *slog.Logger, role string) func() {
	return func() {
		log.Info("record exchange", "role", role, "records_from_other_nodes", n.RecordsReceived())
	}
}
