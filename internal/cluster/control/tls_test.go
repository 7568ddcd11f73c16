package control_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/control"
)

type tlsCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func tlsWritePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func tlsNewCA(t *testing.T, dir, name string) *tlsCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".pem")
	tlsWritePEM(t, file, "CERTIFICATE", der)
	return &tlsCA{cert: cert, key: key, file: file}
}

// issue writes a certificate for 127.0.0.1 (server and client use) signed
// by ca, and its key.
func (ca *tlsCA) issue(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	tlsWritePEM(t, certFile, "CERTIFICATE", der)
	tlsWritePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// syncBuffer is a log sink safe for the server's goroutines.
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

// TestMutualTLS: a worker with a certificate of the cluster's CA links;
// one with another CA's certificate, or without TLS, is refused (Dial
// fails) and the server logs it; a worker that does not trust the
// server's CA refuses it.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := tlsNewCA(t, dir, "cluster-ca"), tlsNewCA(t, dir, "rogue-ca")
	srvCert, srvKey := ca.issue(t, dir, "leader")
	cliCert, cliKey := ca.issue(t, dir, "worker")
	badCert, badKey := rogue.issue(t, dir, "intruder")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv, err := control.NewServer(control.WithTLSFiles(srvCert, srvKey, ca.file), control.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := lis.Addr().String()

	refused := []struct {
		name string
		opts []control.Option
	}{
		{"another CA's certificate", []control.Option{control.WithTLSFiles(badCert, badKey, ca.file)}},
		{"no TLS", nil},
		{"server not trusted", []control.Option{control.WithTLSFiles(cliCert, cliKey, rogue.file)}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			c, err := control.Dial(ctx, addr, "intruder", tc.opts...)
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded, want it refused")
			}
		})
	}
	if n := len(srv.Workers()); n != 0 {
		t.Errorf("%d workers linked, want none", n)
	}
	if !strings.Contains(logs.String(), "refused a peer") {
		t.Errorf("the server did not log the refused peers:\n%s", logs.String())
	}

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := control.Dial(ctx, addr, "worker", control.WithTLSFiles(cliCert, cliKey, ca.file))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := srv.Workers(); len(got) != 1 || got[0] != "worker" {
		t.Errorf("workers %v, want [worker]", got)
	}
}
