package cli

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/node"
	"github.com/sluice-io/sluice/internal/httpstatus"
	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/metrics"
)

// startNodeOps checks the node's TLS files and --savepoint-dir, and starts
// its HTTP endpoint with its metrics; stop stops the endpoint.
func (a *App) startNodeOps(spec *pipeline.Spec, o *nodeOptions, log *slog.Logger) (*node.Metrics, *node.Endpoint, *node.TLS, func(), error) {
	nt, err := o.nodeTLS(time.Now())
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if nt != nil {
		log.Info("node TLS", "certificate", o.tlsCert, "subject", nt.Subject(), "expires", nt.NotAfter(), "etcd_cert", o.cert)
	}
	if o.savepointDir != "" {
		tok, err := a.nodeHTTPToken(spec, *o)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if tok == "" || cmp.Or(o.httpAddr, spec.HTTPListen) == "" {
			return nil, nil, nil, nil, usagef("node: --savepoint-dir enables POST /savepoints on the leader's HTTP endpoint, which needs --http (or http.listen) and a token (--http-token-env VAR or http.token)")
		}
	}
	m := node.NewMetrics(o.nodeID)
	ep, stop, err := a.nodeEndpoint(spec, *o, m, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return m, ep, nt, stop, nil
}

// nodeTLS checks the node's TLS files (--tls-*) and etcd's (--etcd-*) at
// start: a node with bad files exits 2 naming the file and the fault
// instead of retrying its connections forever. Without --etcd-* files,
// etcd gets the node's. It returns the node's TLS material (nil:
// plaintext).
func (o *nodeOptions) nodeTLS(now time.Time) (*node.TLS, error) {
	var nt *node.TLS
	files := node.TLSFiles{Cert: o.tlsCert, Key: o.tlsKey, CA: o.tlsCA}
	if !files.IsZero() {
		t, err := node.LoadTLS(files, now)
		if err != nil {
			return nil, usagef("node: --tls-cert/--tls-key/--tls-ca: %v", err)
		}
		nt = t
		if o.cert == "" && o.key == "" && o.ca == "" {
			o.cert, o.key, o.ca = files.Cert, files.Key, files.CA
		}
	}
	if o.cert == "" && o.key == "" && o.ca == "" {
		return nt, nil
	}
	if err := checkEtcdTLS(o.cert, o.key, o.ca); err != nil {
		return nil, usagef("node: --etcd-cert/--etcd-key/--etcd-ca: %v", err)
	}
	return nt, nil
}

// checkEtcdTLS checks etcd's client TLS files: all three set, the key
// pair loads, the CA file holds a certificate.
func checkEtcdTLS(cert, key, ca string) error {
	if cert == "" || key == "" || ca == "" {
		return fmt.Errorf("mutual TLS to etcd needs a certificate, a key and a CA file; got cert %q, key %q, CA %q", cert, key, ca)
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		return fmt.Errorf("certificate %s with key %s: %w", cert, key, err)
	}
	b, err := os.ReadFile(ca)
	if err != nil {
		return fmt.Errorf("CA file: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(b) {
		return fmt.Errorf("CA file %s: no PEM certificate in it", ca)
	}
	return nil
}

// nodeEndpoint starts the node's HTTP endpoint (--http or http.listen) on
// every node: /healthz, /readyz, /metrics and /status of the node, and
// the leader's job's. It returns nil (and a no-op stop) when no address is
// set.
func (a *App) nodeEndpoint(spec *pipeline.Spec, o nodeOptions, m *node.Metrics, log *slog.Logger) (*node.Endpoint, func(), error) {
	addr := cmp.Or(o.httpAddr, spec.HTTPListen)
	if addr == "" {
		return nil, func() {}, nil
	}
	token, err := a.nodeHTTPToken(spec, o)
	if err != nil {
		return nil, nil, err
	}
	ep := node.NewEndpoint(m, node.EndpointToken(token))
	srv, err := httpstatus.Start(addr, redactHTTP(a.redact, ep))
	if err != nil {
		return nil, nil, err
	}
	if !httpstatus.IsLoopback(srv.Addr()) && token == "" {
		log.Warn("the HTTP endpoint listens beyond loopback without a token", "addr", srv.Addr())
	}
	log.Info("http endpoint", "metrics", "http://"+srv.Addr()+"/metrics", "status", "http://"+srv.Addr()+"/status", "token", token != "")
	return ep, func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Close(sctx)
	}, nil
}

// nodeHTTPToken is the endpoint's bearer token: --http-token-env's
// variable, else http.token.
func (a *App) nodeHTTPToken(spec *pipeline.Spec, o nodeOptions) (string, error) {
	if o.httpTokenEnv == "" {
		return spec.HTTPToken, nil
	}
	t, ok := a.Getenv(o.httpTokenEnv)
	if !ok || t == "" {
		return "", usagef("--http-token-env: environment variable %s is not set", o.httpTokenEnv)
	}
	return t, nil
}

// serveNodeJob plugs the leader's job into the node's endpoint (its
// metrics, status, readiness and, with --savepoint-dir, POST
// /savepoints) until the returned function is called.
func (a *App) serveNodeJob(ep *node.Endpoint, spec *pipeline.Spec, o nodeOptions, log *slog.Logger, reg *metrics.Registry, job *runningJob) (func(), error) {
	if ep == nil {
		return func() {}, nil
	}
	token, err := a.nodeHTTPToken(spec, o)
	if err != nil {
		return nil, err
	}
	hopts := []httpstatus.Option{httpstatus.Token(token), httpstatus.Logger(log), httpstatus.ReadyCheckpointAge(readyAge(spec))}
	if o.savepointDir != "" {
		take := func(ctx context.Context) (checkpoint.Info, error) {
			hd := job.getHandle()
			if hd == nil {
				return checkpoint.Info{}, errors.New("the job has not started")
			}
			return hd.TriggerSavepoint(ctx, o.savepointDir)
		}
		hopts = append(hopts, httpstatus.Savepoints(take, spec.HTTPSavepointRetain, spec.CheckpointTimeout+time.Minute))
	}
	h, err := httpstatus.Handler(reg, job.getView, hopts...)
	if err != nil {
		return nil, usagef("node: %v", err)
	}
	return ep.SetJob(h), nil
}
