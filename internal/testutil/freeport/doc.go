// Package freeport picks loopback TCP ports for servers that a test starts
// and that bind the port themselves (an etcd process or embedded member, a
// sluice node's listeners).
//
// A port from a listen on 127.0.0.1:0 comes from the kernel's ephemeral
// range, the range every outgoing connection takes its local port from:
// between the test closing its probe listener and the server binding the
// port, a connection of any process on the machine (a Kafka client of a
// parallel test) can take it, and the server fails with "address already
// in use". [Pick] chooses a random port below that range instead, where
// only another test picking ports can collide, and checks that it is free
// now.
package freeport
