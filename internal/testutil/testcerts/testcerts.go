package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority of a test.
type CA struct {
	Name string            // its common name
	Cert *x509.Certificate // its certificate
	PEM  []byte            // its certificate, PEM-encoded
	key  *ecdsa.PrivateKey
}

// Leaf is a certificate signed by a CA, with its key.
type Leaf struct {
	Name    string          // its common name
	TLS     tls.Certificate // certificate (Leaf set) and key, for a tls.Config
	CertPEM []byte          // the certificate, PEM-encoded
	KeyPEM  []byte          // the key, PEM-encoded (EC PRIVATE KEY)
}

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("testcerts: generate a key: %v", err)
	}
	return key
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatalf("testcerts: serial number: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}

func validity() (notBefore, notAfter time.Time) {
	now := time.Now()
	return now.Add(-time.Hour), now.Add(24 * time.Hour)
}

// NewCA returns a new self-signed CA whose common name is name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key := newKey(tb)
	from, to := validity()
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: from, NotAfter: to,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("testcerts: CA %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcerts: CA %s: %v", name, err)
	}
	return &CA{Name: name, Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a pool that trusts the CA alone.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the CA's certificate to dir/<name>.pem (mode 0600)
// and returns the file's path.
func (ca *CA) WriteFile(tb testing.TB, dir string) string {
	tb.Helper()
	f := filepath.Join(dir, ca.Name+".pem")
	writeFile(tb, f, ca.PEM)
	return f
}

// Issue returns a certificate for 127.0.0.1, ::1 and localhost whose
// common name is name, signed by the CA, for the given extended key
// usages (default: server and client authentication).
func (ca *CA) Issue(tb testing.TB, name string, usages ...x509.ExtKeyUsage) *Leaf {
	tb.Helper()
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	key := newKey(tb)
	from, to := validity()
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb), Subject: pkix.Name{CommonName: name},
		NotBefore: from, NotAfter: to,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("testcerts: certificate %s: %v", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("testcerts: certificate %s: %v", name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatalf("testcerts: key of %s: %v", name, err)
	}
	return &Leaf{
		Name:    name,
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
}

// WriteFiles writes the certificate to dir/<name>.pem and its key to
// dir/<name>-key.pem (mode 0600) and returns their paths.
func (l *Leaf) WriteFiles(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	certFile, keyFile = filepath.Join(dir, l.Name+".pem"), filepath.Join(dir, l.Name+"-key.pem")
	writeFile(tb, certFile, l.CertPEM)
	writeFile(tb, keyFile, l.KeyPEM)
	return certFile, keyFile
}

// IssueFiles is Issue followed by WriteFiles.
func (ca *CA) IssueFiles(tb testing.TB, dir, name string, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	tb.Helper()
	return ca.Issue(tb, name, usages...).WriteFiles(tb, dir)
}

func writeFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatalf("testcerts: %v", err)
	}
}
