package grpcframe

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

func TestCodecRoundTrip(t *testing.T) {
	RegisterCodec("grpcframe-test")
	c := encoding.GetCodecV2("grpcframe-test")
	if c == nil {
		t.Fatal("the codec is not registered")
	}
	in := []byte("frame bytes")
	data, err := c.Marshal(&Msg{B: in})
	if err != nil {
		t.Fatal(err)
	}
	in[0] = 'X' // the sender may reuse its buffer at once
	var out Msg
	if err := c.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	data.Free()
	if !bytes.Equal(out.B, []byte("frame bytes")) {
		t.Errorf("round trip: %q", out.B)
	}
	if _, err := c.Marshal("not a frame"); err == nil || !strings.Contains(err.Error(), "grpcframe-test") {
		t.Errorf("Marshal of another type: %v", err)
	}
	if err := c.Unmarshal(mem.BufferSlice{}, new(int)); err == nil {
		t.Error("Unmarshal into another type: no error")
	}
}

func TestTLSConfigFiles(t *testing.T) {
	if tc, err := TLSConfig("", "", "", true); tc != nil || err != nil {
		t.Errorf("no files: %v, %v; want plaintext", tc, err)
	}
	if _, err := TLSConfig("cert.pem", "", "", false); err == nil || !strings.Contains(err.Error(), "needs a certificate, a key and a CA") {
		t.Errorf("only a certificate: %v", err)
	}
	if _, err := TLSConfig("/nonexistent/c.pem", "/nonexistent/k.pem", "/nonexistent/ca.pem", false); err == nil || !strings.Contains(err.Error(), "/nonexistent/c.pem") {
		t.Errorf("missing files: %v", err)
	}
}

func TestKeepaliveAndOptions(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{{10 * time.Second, 5 * time.Second}, {time.Second, time.Second}} {
		if got := KeepaliveTimeout(c.in); got != c.want {
			t.Errorf("KeepaliveTimeout(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if n := len(ServerOptions("test", 1<<20, time.Second, nil, nil)); n != 3 {
		t.Errorf("%d server options without TLS, want 3", n)
	}
	if got := PeerAddr(context.Background()); got != "unknown" {
		t.Errorf("PeerAddr without a peer: %q", got)
	}
}
