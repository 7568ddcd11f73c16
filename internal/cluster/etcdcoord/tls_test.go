package etcdcoord_test

import (
	"crypto/x509"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
	"github.com/sluice-io/sluice/internal/testutil/testcerts"
)

// TestMutualTLS runs etcd with client certificate authentication: a node
// with a certificate of the trusted CA works; one without TLS, or with a
// certificate of another CA, is refused.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcerts.NewCA(t, "ca"), testcerts.NewCA(t, "other-ca")
	caFile := ca.WriteFile(t, dir)
	srvCert, srvKey := ca.IssueFiles(t, dir, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := ca.IssueFiles(t, dir, "client", x509.ExtKeyUsageClientAuth)
	badCert, badKey := other.IssueFiles(t, dir, "intruder", x509.ExtKeyUsageClientAuth)

	ec := startEtcdTLS(t, 1, &transport.TLSInfo{CertFile: srvCert, KeyFile: srvKey, TrustedCAFile: caFile, ClientCertAuth: true})
	eps := []string{ec.members[0].clientURL.Host}

	n, err := etcdcoord.New(stepCtx(t), eps, etcdcoord.WithTLSFiles(cliCert, cliKey, caFile))
	if err != nil {
		t.Fatalf("New with the trusted client certificate: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Join(stepCtx(t), coord.Member{ID: "n0"}); err != nil {
		t.Fatalf("Join over mutual TLS: %v", err)
	}
	l, err := campaign(stepCtx(t), n)
	if err != nil {
		t.Fatalf("Campaign over mutual TLS: %v", err)
	}
	publish(t, l, 1)

	for name, opts := range map[string][]etcdcoord.Option{
		"no TLS":                  nil,
		"certificate of other CA": {etcdcoord.WithTLSFiles(badCert, badKey, caFile)},
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
