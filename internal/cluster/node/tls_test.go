package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/node"
	"github.com/sluice-io/sluice/internal/testutil/testcerts"
)

// testCA is a testcerts CA whose certificate is written to file.
type testCA struct {
	*testcerts.CA
	file string
}

func newCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	ca := testcerts.NewCA(t, name)
	return &testCA{CA: ca, file: ca.WriteFile(t, dir)}
}

// issue writes a certificate for 127.0.0.1 with the given uses (default:
// server and client), signed by ca, and its key.
func (ca *testCA) issue(t *testing.T, dir, name string, uses ...x509.ExtKeyUsage) node.TLSFiles {
	t.Helper()
	cert, key := ca.IssueFiles(t, dir, name, uses...)
	return node.TLSFiles{Cert: cert, Key: key, CA: ca.file}
}

// TestLoadTLSChecks: LoadTLS refuses, naming the file and the fault,
// what would otherwise fail at the first connection.
func TestLoadTLSChecks(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, dir, "cluster-ca"), newCA(t, dir, "other-ca")
	good := ca.issue(t, dir, "n1")
	foreign := other.issue(t, dir, "intruder")
	serverOnly := ca.issue(t, dir, "server-only", x509.ExtKeyUsageServerAuth)
	notPEM := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if tl, err := node.LoadTLS(good, now); err != nil || !strings.Contains(tl.Subject(), "n1") {
		t.Fatalf("LoadTLS of good files: %v", err)
	}
	tests := []struct {
		name string
		f    node.TLSFiles
		now  time.Time
		want string
	}{
		{"no key", node.TLSFiles{Cert: good.Cert, CA: good.CA}, now, "needs a certificate, a key and a CA file"},
		{"missing cert", node.TLSFiles{Cert: filepath.Join(dir, "nope.crt"), Key: good.Key, CA: good.CA}, now, "nope.crt"},
		{"key of another cert", node.TLSFiles{Cert: good.Cert, Key: foreign.Key, CA: good.CA}, now, "n1.pem"},
		{"CA without PEM", node.TLSFiles{Cert: good.Cert, Key: good.Key, CA: notPEM}, now, "no PEM certificate"},
		{"certificate of another CA", node.TLSFiles{Cert: foreign.Cert, Key: foreign.Key, CA: ca.file}, now, "does not verify against the CA file"},
		{"expired", good, now.Add(25 * time.Hour), "not now"},
		{"server use only", serverOnly, now, "for client use"},
	}
	for _, tt := range tests {
		if _, err := node.LoadTLS(tt.f, tt.now); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: LoadTLS: %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// handshake runs one TLS handshake between a server with cfg and a client
// with ccfg over loopback, and returns the server's and the client's
// errors (the client's after reading: in TLS 1.3 a refused client learns
// it on its first read).
func handshake(t *testing.T, srv *tls.Config, cli *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		tc := tls.Server(c, srv)
		err = tc.HandshakeContext(ctx)
		if err == nil {
			_, err = tc.Write([]byte("x"))
		}
		done <- err
	}()
	d := tls.Dialer{Config: cli}
	c, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err == nil {
		buf := make([]byte, 1)
		_, err = c.Read(buf)
		c.Close()
	}
	return <-done, err
}

// TestTLSRefusesAnotherCA: the node's server accepts a node with a
// certificate of the cluster's CA; a node with a certificate from another
// CA, or without one, is refused, and the refusal is logged with the
// peer's address and the reason.
func TestTLSRefusesAnotherCA(t *testing.T) {
	dir := t.TempDir()
	ca, other := newCA(t, dir, "cluster-ca"), newCA(t, dir, "other-ca")
	srvTLS, err := node.LoadTLS(ca.issue(t, dir, "n1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	peerTLS, err := node.LoadTLS(ca.issue(t, dir, "n2"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	srv := srvTLS.ServerConfig(slog.New(slog.NewTextHandler(&logs, nil)))

	if serr, cerr := handshake(t, srv, peerTLS.ClientConfig("127.0.0.1")); serr != nil || cerr != nil {
		t.Fatalf("a node of the cluster's CA: server %v, client %v", serr, cerr)
	}
	if strings.Contains(logs.String(), "refused") {
		t.Fatalf("a trusted peer was logged as refused:\n%s", logs.String())
	}

	// A node whose certificate another CA signed (it trusts the cluster's
	// CA, so it is the server that refuses).
	f := other.issue(t, dir, "intruder")
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	intruder := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	serr, cerr := handshake(t, srv, intruder)
	if serr == nil || cerr == nil {
		t.Fatalf("a node with another CA's certificate: server %v, client %v; want both to fail", serr, cerr)
	}
	if l := logs.String(); !strings.Contains(l, "refused a peer") || !strings.Contains(l, "intruder") || !strings.Contains(l, "127.0.0.1:") {
		t.Fatalf("the refusal is not logged with the peer and its certificate:\n%s", l)
	}

	// A client without a certificate.
	noCert := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13}
	if serr, _ := handshake(t, srv, noCert); serr == nil {
		t.Fatal("a client without a certificate was accepted")
	}
	if n := strings.Count(logs.String(), "refused a peer"); n != 2 {
		t.Errorf("%d refusals logged, want 2:\n%s", n, logs.String())
	}
}
