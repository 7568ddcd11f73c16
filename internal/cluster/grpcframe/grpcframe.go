// Package grpcframe is the gRPC plumbing that the control channel
// (internal/cluster/control) and the record exchange
// (internal/cluster/exchange) share: frames moved as raw bytes under a
// content-subtype of their own (no protobuf, no code generation), mutual
// TLS from files, the server's keepalive options, and the log line of
// each peer refused during the TLS handshake.
package grpcframe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/peer"
)

// Msg is one gRPC message: a frame's bytes.
type Msg struct{ B []byte }

// RegisterCodec registers with gRPC the codec named name, which moves
// *Msg as raw bytes; calls give it as their content-subtype
// (grpc.CallContentSubtype). Call it from an init function, as gRPC wants
// codecs registered, so that a service can share a gRPC server with others
// without forcing its codec on them.
//
// Marshal copies the frame into a buffer of gRPC's pool (which gRPC frees
// once written), so the sender may reuse its frame buffer at once;
// Unmarshal copies the received bytes into a fresh slice the receiver
// owns (what it decodes may refer to it).
func RegisterCodec(name string) { encoding.RegisterCodecV2(codec{name}) }

type codec struct{ name string }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*Msg)
	if !ok {
		return nil, fmt.Errorf("%s: wire codec cannot marshal %T", c.name, v)
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(len(m.B))
	copy(*buf, m.B)
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(*Msg)
	if !ok {
		return fmt.Errorf("%s: wire codec cannot unmarshal into %T", c.name, v)
	}
	m.B = data.Materialize()
	return nil
}

func (c codec) Name() string { return c.name }

// PeerAddr is the address of the peer of a server stream's ctx, or
// "unknown".
func PeerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

// TLSConfig loads mutual TLS 1.3 from PEM files: this node's certificate
// and key and the CA bundle that signed every node's certificate. A
// server requires and verifies client certificates; a client verifies the
// server's. It returns nil when no file is given, and an error when only
// some are.
func TLSConfig(certFile, keyFile, caFile string, server bool) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && caFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, fmt.Errorf("TLS needs a certificate, a key and a CA file (got cert %q, key %q, CA %q)", certFile, keyFile, caFile)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s and key %s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	t := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if server {
		t.ClientCAs, t.ClientAuth = pool, tls.RequireAndVerifyClientCert
	} else {
		t.RootCAs = pool
	}
	return t, nil
}

// KeepaliveTimeout is how long an end waits for the answer to a ping sent
// every interval: half of it, at least 1s.
func KeepaliveTimeout(interval time.Duration) time.Duration {
	return max(time.Second, interval/2)
}

// ServerOptions are the options of a gRPC server of frames of at most
// maxRecv bytes: it pings an idle connection every keepalive and drops it
// when no answer comes within KeepaliveTimeout, lets clients ping as often
// as every second, and with tc (TLSConfig) speaks TLS and logs each peer
// refused during the handshake on log as "<service>: refused a peer: TLS
// handshake failed" (gRPC itself only drops the connection).
func ServerOptions(service string, maxRecv int, keepaliveInterval time.Duration, tc *tls.Config, log *slog.Logger) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxRecv),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveInterval, Timeout: KeepaliveTimeout(keepaliveInterval)}),
		// Clients ping as often as every keepalive/2 (theirs may be shorter).
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(&loggingCreds{TransportCredentials: credentials.NewTLS(tc), log: log, service: service}))
	}
	return opts
}

// loggingCreds logs every peer refused during the TLS handshake (a bad or
// missing client certificate).
type loggingCreds struct {
	credentials.TransportCredentials
	log     *slog.Logger
	service string
}

func (c *loggingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		c.log.Warn(c.service+": refused a peer: TLS handshake failed", "peer", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c *loggingCreds) Clone() credentials.TransportCredentials {
	return &loggingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, service: c.service}
}
