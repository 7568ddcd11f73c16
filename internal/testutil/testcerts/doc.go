// Package testcerts makes throwaway certificates for tests of TLS and
// mutual TLS: a CA ([NewCA]) and certificates it signs ([CA.Issue]) for
// 127.0.0.1, ::1 and localhost, in memory (tls.Certificate, an
// x509.CertPool) or written to PEM files for code that takes file names
// ([CA.WriteFile], [Leaf.WriteFiles], [CA.IssueFiles]).
//
// Keys are ECDSA P-256; certificates are valid from an hour ago for a
// day. A CA that signed nothing of a server's is how a test makes a client
// that must refuse it:
//
//	ca, rogue := testcerts.NewCA(t, "cluster-ca"), testcerts.NewCA(t, "rogue-ca")
//	srvCert, srvKey := ca.IssueFiles(t, dir, "server")
//	badCert, badKey := rogue.IssueFiles(t, dir, "intruder", x509.ExtKeyUsageClientAuth)
//	caFile := ca.WriteFile(t, dir)
package testcerts
