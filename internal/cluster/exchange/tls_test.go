package exchange_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
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

// TestMutualTLS: a node with a certificate of the cluster's CA exchanges
// records; one with another CA's certificate, or without TLS, is refused
// and logged; a node that does not trust the server's CA refuses it.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := tlsNewCA(t, dir, "cluster-ca"), tlsNewCA(t, dir, "rogue-ca")
	srvCert, srvKey := ca.issue(t, dir, "node-a")
	cliCert, cliKey := ca.issue(t, dir, "node-b")
	badCert, badKey := rogue.issue(t, dir, "intruder")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv, addr := startServer(t, exchange.WithTLSFiles(srvCert, srvKey, ca.file), exchange.WithLogger(log))
	ctx := t.Context()
	ep := exchange.Epoch{Attempt: 1}

	r, err := exchange.Listen(srv, testCh, ep, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	refused := []struct {
		name string
		opts []exchange.Option
	}{
		{"another CA's certificate", []exchange.Option{exchange.WithTLSFiles(badCert, badKey, ca.file)}},
		{"no TLS", nil},
		{"server not trusted", []exchange.Option{exchange.WithTLSFiles(cliCert, cliKey, rogue.file)}},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, addr, tc.opts...)
			octx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if s, err := exchange.Open(octx, c, testCh, ep, u64Codec{}); err == nil {
				_ = s.Close(ctx)
				t.Fatal("Open succeeded, want it refused")
			} else if !errors.Is(err, exchange.ErrBroken) {
				t.Errorf("got %v, want ErrBroken (unavailable)", err)
			}
		})
	}
	eventually(t, "the refused peers to be logged", func() bool {
		return strings.Count(logs.String(), "refused a peer") >= 2
	})
	if !strings.Contains(logs.String(), "127.0.0.1") {
		t.Errorf("log does not name the peer:\n%s", logs.String())
	}

	t.Logf("server log:\n%s", logs.String())
	c := dial(t, addr, exchange.WithTLSFiles(cliCert, cliKey, ca.file))
	s, err := exchange.Open(ctx, c, testCh, ep, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SendBatch(ctx, []uint64{42}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := r.Next(ctx); err != nil || m.Records[0] != 42 {
		t.Fatalf("over mutual TLS: got %v, %v", m, err)
	}

	if _, err := exchange.NewServer(exchange.WithTLSFiles(srvCert, "", ca.file)); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("TLS without a key: got %v", err)
	}
	if _, err := exchange.NewServer(exchange.WithTLSFiles(srvCert, srvKey, filepath.Join(dir, "missing.pem"))); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing CA file: got %v", err)
	}
}
