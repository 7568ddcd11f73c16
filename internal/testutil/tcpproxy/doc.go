// Package tcpproxy is a loopback TCP proxy for tests that inject network
// faults between a client and a server.
//
// A [Proxy] listens on 127.0.0.1 and forwards every connection it accepts
// to one target address. A test points its client at [Proxy.Addr] and
// then, while traffic flows:
//
//   - [Proxy.Cut] closes every open connection (new ones are still
//     accepted); [Proxy.Reset] does the same with a TCP reset;
//   - [Proxy.Hold] stops forwarding one direction or both without closing
//     anything (a frozen link, a partition, an answer that the server sent
//     and the client never gets) until [Proxy.Release];
//   - [Proxy.Refuse] closes new connections as soon as they are accepted,
//     for a while (a server that is restarting);
//   - [Proxy.Down] closes the listener as well, so that dials are refused,
//     until [Proxy.Up] listens again on the same port.
//
// Counters ([Proxy.Accepted], [Proxy.Cuts], [Proxy.Refused],
// [Proxy.Bytes]) tell a test whether its faults happened. Every goroutine
// of a proxy is stopped and waited for by [Proxy.Close], which [Start]
// registers with the test's Cleanup. The proxy listens on loopback only.
//
//	p := tcpproxy.Start(t, serverAddr)
//	client := connect(p.Addr())
//	...
//	if p.Cut() == 0 { t.Fatal("nothing to cut") }
package tcpproxy
