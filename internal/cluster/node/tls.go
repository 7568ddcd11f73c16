package node

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// TLSFiles are the PEM files of a node's mutual TLS: its certificate and
// key, and the CA bundle that signed every node's certificate. The same
// files serve the node's server (node-to-node traffic) and its clients
// (to other nodes, and to etcd unless etcd has files of its own).
type TLSFiles struct {
	Cert, Key, CA string
}

// IsZero reports whether no file is set (plaintext).
func (f TLSFiles) IsZero() bool { return f.Cert == "" && f.Key == "" && f.CA == "" }

// TLS is a node's loaded and checked mutual TLS material.
type TLS struct {
	Files TLSFiles
	cert  tls.Certificate
	leaf  *x509.Certificate
	pool  *x509.CertPool
}

// LoadTLS loads and checks f, so that a node with bad files fails at
// start with an error naming the file and the fault rather than at its
// first connection: all three files are needed; the key must match the
// certificate; the CA file must hold at least one certificate; the node's
// certificate must be valid at now and chain to that CA for both server
// and client use (a node is both).
func LoadTLS(f TLSFiles, now time.Time) (*TLS, error) {
	if f.Cert == "" || f.Key == "" || f.CA == "" {
		return nil, fmt.Errorf("node TLS needs a certificate, a key and a CA file; got cert %q, key %q, CA %q", f.Cert, f.Key, f.CA)
	}
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("node TLS: certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("node TLS: certificate %s: %w", f.Cert, err)
		}
	}
	b, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("node TLS: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("node TLS: CA file %s: no PEM certificate in it", f.CA)
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("node TLS: certificate %s (%s) is valid from %s to %s, not now (%s)", f.Cert, leaf.Subject,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			return nil, fmt.Errorf("node TLS: certificate %s (%s) does not verify against the CA file %s for %s use: %w", f.Cert, leaf.Subject, f.CA, usageName(use), err)
		}
	}
	return &TLS{Files: f, cert: cert, leaf: leaf, pool: pool}, nil
}

func usageName(u x509.ExtKeyUsage) string {
	if u == x509.ExtKeyUsageServerAuth {
		return "server"
	}
	return "client"
}

// Subject is the node certificate's subject, for logs.
func (t *TLS) Subject() string { return t.leaf.Subject.String() }

// NotAfter is when the node's certificate expires.
func (t *TLS) NotAfter() time.Time { return t.leaf.NotAfter }

// ServerConfig is the TLS configuration of the node's server: TLS 1.3,
// a client certificate is required and must chain to the CA for client
// use; every refused peer is logged on log with its address and the
// reason (a certificate of another CA, an expired one, none at all).
func (t *TLS) ServerConfig(log *slog.Logger) *tls.Config {
	if log == nil {
		log = slog.Default()
	}
	base := &tls.Config{Certificates: []tls.Certificate{t.cert}, MinVersion: tls.VersionTLS13,
		// Requested, not required, so that a peer without one reaches
		// verifyPeer and is logged too; verifyPeer requires it.
		ClientAuth: tls.RequestClientCert,
		// Every connection shows its certificate: no resumption.
		SessionTicketsDisabled: true}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			peer := "unknown"
			if hello.Conn != nil {
				peer = hello.Conn.RemoteAddr().String()
			}
			c := base.Clone()
			c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
				err := t.verifyPeer(raw)
				if err != nil {
					log.Warn("node TLS: refused a peer", "peer", peer, "error", err)
				}
				return err
			}
			return c, nil
		},
	}
}

// errNoPeerCert is the reason a peer without a certificate is refused.
var errNoPeerCert = errors.New("the peer sent no certificate")

// verifyPeer checks a peer's certificate chain against the CA for client
// use.
func (t *TLS) verifyPeer(raw [][]byte) error {
	if len(raw) == 0 {
		return errNoPeerCert
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("the peer's certificate does not parse: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: t.pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return fmt.Errorf("certificate of %s: %w", certs[0].Subject, err)
	}
	return nil
}

// ClientConfig is the TLS configuration of the node's clients to other
// nodes: TLS 1.3, the node's certificate, the server verified against the
// CA (and serverName, when not empty; else the dialled address).
func (t *TLS) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{t.cert}, RootCAs: t.pool, MinVersion: tls.VersionTLS13, ServerName: serverName}
}
