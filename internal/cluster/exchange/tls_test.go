package exchange_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/testutil/testcerts"
)

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
	ca, rogue := testcerts.NewCA(t, "cluster-ca"), testcerts.NewCA(t, "rogue-ca")
	caFile, rogueFile := ca.WriteFile(t, dir), rogue.WriteFile(t, dir)
	srvCert, srvKey := ca.IssueFiles(t, dir, "node-a")
	cliCert, cliKey := ca.IssueFiles(t, dir, "node-b")
	badCert, badKey := rogue.IssueFiles(t, dir, "intruder")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv, addr := startServer(t, exchange.WithTLSFiles(srvCert, srvKey, caFile), exchange.WithLogger(log))
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
		{"another CA's certificate", []exchange.Option{exchange.WithTLSFiles(badCert, badKey, caFile)}},
		{"no TLS", nil},
		{"server not trusted", []exchange.Option{exchange.WithTLSFiles(cliCert, cliKey, rogueFile)}},
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
	c := dial(t, addr, exchange.WithTLSFiles(cliCert, cliKey, caFile))
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

	if _, err := exchange.NewServer(exchange.WithTLSFiles(srvCert, "", caFile)); err == nil || !strings.Contains(err.Error(), "key") {
		t.Errorf("TLS without a key: got %v", err)
	}
	if _, err := exchange.NewServer(exchange.WithTLSFiles(srvCert, srvKey, filepath.Join(dir, "missing.pem"))); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("a missing CA file: got %v", err)
	}
}
