package etcdcoord_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newCA(t *testing.T, dir, name string) *testCA {
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
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, name+".pem")
	writePEM(t, file, "CERTIFICATE", der)
	return &testCA{cert: cert, key: key, file: file}
}

// issue writes a certificate and key for 127.0.0.1 signed by ca and
// returns their files.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
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
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

// TestMutualTLS runs etcd with client certificate authentication: a node
// with a certificate of the trusted CA works; one without TLS, or with a
// certificate of another CA, is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newCA(t, dir, "ca")
	other := newCA(t, dir, "other-ca")
	srvCert, srvKey := ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	badCert, badKey := other.issue(t, dir, "intruder", x509.ExtKeyUsageClientAuth)

	peer, client := freeURL(t), freeURL(t)
	client.Scheme = "https"
	cfg := embed.NewConfig()
	cfg.Name = "tls0"
	cfg.Dir = filepath.Join(dir, "data")
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = "tls0=" + peer.String()
	cfg.TickMs, cfg.ElectionMs = 50, 500
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: ca.file, ClientCertAuth: true}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatalf("starting etcd with TLS: %v", err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(step):
		t.Fatalf("etcd not ready within %v", step)
	}
	eps := []string{client.Host}

	n, err := etcdcoord.New(stepCtx(t), eps, etcdcoord.WithTLSFiles(cliCert, cliKey, ca.file))
	if err != nil {
		t.Fatalf("New with the trusted client certificate: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Join(stepCtx(t), coord.Member{ID: "n0"}); err != nil {
		t.Fatalf("Join over mutual TLS: %v", err)
	}
	l, err := n.Campaign(stepCtx(t))
	if err != nil {
		t.Fatalf("Campaign over mutual TLS: %v", err)
	}
	publish(t, l, 1)

	for name, opts := range map[string][]etcdcoord.Option{
		"no TLS":                  nil,
		"certificate of other CA": {etcdcoord.WithTLSFiles(badCert, badKey, ca.file)},
	} {
		opts = append(opts, etcdcoord.WithDialTimeout(2*time.Second))
		c, err := etcdcoord.New(stepCtx(t), eps, opts...)
		if err == nil {
			_ = c.Close()
			t.Fatalf("New with %s succeeded, want it refused", name)
		}
		t.Logf("%s: refused: %v", name, err)
	}
}
