package testcerts_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/testutil/testcerts"
)

// handshake runs a TLS handshake between a server with srv (requiring a
// client certificate of clientCAs when not nil) and a client trusting
// roots with cli (nil: no certificate), over loopback, and returns the
// client's and the server's errors.
func handshake(t *testing.T, srv tls.Certificate, clientCAs *x509.CertPool, roots *x509.CertPool, cli *tls.Certificate) (cliErr, srvErr error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := &tls.Config{Certificates: []tls.Certificate{srv}, MinVersion: tls.VersionTLS13}
	if clientCAs != nil {
		cfg.ClientCAs, cfg.ClientAuth = clientCAs, tls.RequireAndVerifyClientCert
	}
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		s := tls.Server(c, cfg)
		err = s.Handshake()
		if err == nil {
			_, err = io.WriteString(s, "x") // TLS 1.3: the client's certificate is checked by now
		}
		done <- err
	}()
	ccfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}
	if cli != nil {
		ccfg.Certificates = []tls.Certificate{*cli}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 30 * time.Second}, "tcp", ln.Addr().String(), ccfg)
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		c.Close()
	}
	return err, <-done
}

// TestMutualTLS: a server and a client with certificates of one CA
// connect; a client trusting another CA refuses the server; a server
// refuses a client certificate of another CA.
func TestMutualTLS(t *testing.T) {
	ca, rogue := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "rogue")
	srv, cli, bad := ca.Issue(t, "server"), ca.Issue(t, "client"), rogue.Issue(t, "intruder", x509.ExtKeyUsageClientAuth)
	if cerr, serr := handshake(t, srv.TLS, ca.Pool(), ca.Pool(), &cli.TLS); cerr != nil || serr != nil {
		t.Fatalf("same CA: client %v, server %v", cerr, serr)
	}
	var unknown x509.UnknownAuthorityError
	if cerr, _ := handshake(t, srv.TLS, nil, rogue.Pool(), nil); !errors.As(cerr, &unknown) {
		t.Errorf("client trusting another CA: %v, want an unknown authority error", cerr)
	}
	if _, serr := handshake(t, srv.TLS, ca.Pool(), ca.Pool(), &bad.TLS); serr == nil {
		t.Error("server accepted a client certificate of another CA")
	}
}

// TestFiles: the files written load as a key pair and a CA that verifies
// it.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewCA(t, "ca")
	caFile := ca.WriteFile(t, dir)
	certFile, keyFile := ca.IssueFiles(t, dir, "node")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatal("the CA file holds no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify against the CA file: %v", err)
	}
	for _, f := range []string{caFile, certFile, keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", f, st.Mode().Perm())
		}
	}
}
