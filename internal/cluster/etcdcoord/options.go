package etcdcoord

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"
)

// Option configures New.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	leaseTTL       time.Duration
	prefix         string
	dialTimeout    time.Duration
	requestTimeout time.Duration
	certFile       string
	keyFile        string
	caFile         string
}

func defaultConfig() config {
	return config{
		leaseTTL:       10 * time.Second,
		prefix:         "/sluice/",
		dialTimeout:    5 * time.Second,
		requestTimeout: 5 * time.Second,
	}
}

// WithLeaseTTL sets the TTL of the node's lease: how long after a node
// stops renewing it (crash, pause, partition) its membership and
// leadership end. It is rounded up to whole seconds; etcd raises a TTL
// below its minimum (1.5 election timeouts) to that minimum. The default is
// 10s.
func WithLeaseTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.leaseTTL = d })
}

// WithPrefix sets the key prefix under which all of this cluster's keys
// live; jobs that share an etcd cluster need distinct prefixes, e.g.
// "/sluice/<job>/". A '/' is appended when missing. The default is
// "/sluice/".
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) { c.prefix = p })
}

// WithDialTimeout bounds connecting to etcd and creating the session's
// lease in New. The default is 5s.
func WithDialTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.dialTimeout = d })
}

// WithRequestTimeout bounds each etcd request (Join, reads, a fenced write,
// Resign) on top of the caller's context; Campaign and watches are bounded
// by the caller's context only. While etcd is unreachable or has no quorum,
// calls fail after this long with an error wrapping coord.ErrUnavailable.
// The default is 5s.
func WithRequestTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.requestTimeout = d })
}

// WithTLSFiles enables mutual TLS to etcd: the client certificate and key
// (PEM) this node presents, and the CA bundle (PEM) that signed the etcd
// servers' certificates. The default is plaintext, which only suits
// loopback.
func WithTLSFiles(certFile, keyFile, caFile string) Option {
	return optionFunc(func(c *config) { c.certFile, c.keyFile, c.caFile = certFile, keyFile, caFile })
}

func (c *config) validate() error {
	if c.leaseTTL <= 0 {
		return fmt.Errorf("etcdcoord: lease TTL %v: must be positive", c.leaseTTL)
	}
	if c.dialTimeout <= 0 || c.requestTimeout <= 0 {
		return fmt.Errorf("etcdcoord: dial timeout %v, request timeout %v: must be positive", c.dialTimeout, c.requestTimeout)
	}
	if c.prefix == "" {
		return fmt.Errorf("etcdcoord: empty key prefix")
	}
	if !strings.HasSuffix(c.prefix, "/") {
		c.prefix += "/"
	}
	set := 0
	for _, f := range []string{c.certFile, c.keyFile, c.caFile} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return fmt.Errorf("etcdcoord: TLS needs a certificate, a key and a CA file; got cert %q, key %q, CA %q", c.certFile, c.keyFile, c.caFile)
	}
	return nil
}

// ttlSeconds is the lease TTL in whole seconds, rounded up.
func (c *config) ttlSeconds() int {
	return int((c.leaseTTL + time.Second - 1) / time.Second)
}

func (c *config) tlsConfig() (*tls.Config, error) {
	if c.certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: loading client certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	}
	pem, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: reading CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("etcdcoord: CA file %s: no PEM certificate in it", c.caFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
