package format

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/sr/srfake"
)

func TestRegistryTLS(t *testing.T) {
	ctx := context.Background()
	reg := srfake.NewRegistry()
	srv := httptest.NewTLSServer(reg.Handler())
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	encode := func(rc RegistryConfig) error {
		rc.URLs, rc.Schema, rc.AutoRegister = []string{srv.URL}, userV1Small, true
		c, err := Builtin().New("avro", Config{Registry: &rc})
		if err != nil {
			return err
		}
		_, err = c.Encode(ctx, "t", nil, map[string]any{"id": int64(1)})
		return err
	}
	// Without the CA the certificate is not trusted; the error names the
	// registry.
	wantErr(t, encode(RegistryConfig{}), srv.URL, "certificate")
	if err := encode(RegistryConfig{CAFile: ca}); err != nil {
		t.Fatal(err)
	}
	if err := encode(RegistryConfig{InsecureSkipVerify: true}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, encode(RegistryConfig{CertFile: ca}), "needs both a certificate and a key file")
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr(t, encode(RegistryConfig{CAFile: bad}), "no PEM certificate in "+bad)
}
