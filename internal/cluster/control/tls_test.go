package control_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/control"
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

// TestMutualTLS: a worker with a certificate of the cluster's CA links;
// one with another CA's certificate, or without TLS, is refused (Dial
// fails) and the server logs it; a worker that does not trust the
// server's CA refuses it.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, rogue := testcerts.NewCA(t, "cluster-ca"), testcerts.NewCA(t, "rogue-ca")
	caFile, rogueFile := ca.WriteFile(t, dir), rogue.WriteFile(t, dir)
	srvCert, srvKey := ca.IssueFiles(t, dir, "leader")
	cliCert, cliKey := ca.IssueFiles(t, dir, "worker")
	badCert, badKey := rogue.IssueFiles(t, dir, "intruder")
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	srv, err := control.NewServer(control.WithTLSFiles(srvCert, srvKey, caFile), control.WithLogger(log))
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
		{"another CA's certificate", []control.Option{control.WithTLSFiles(badCert, badKey, caFile)}},
		{"no TLS", nil},
		{"server not trusted", []control.Option{control.WithTLSFiles(cliCert, cliKey, rogueFile)}},
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
	c, err := control.Dial(ctx, addr, "worker", control.WithTLSFiles(cliCert, cliKey, caFile))
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
