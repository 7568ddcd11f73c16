// Package httpsource is an example of a custom sluice source: it reads a
// cursor-paged REST API, one split per endpoint, and resumes each endpoint
// at its cursor after a failure or a restore, mid-stream. It is written
// against sluice's public API only — source/enumerate supplies the
// enumerator, source/readerbase the reader — and passes the connector
// conformance suite (see httpsource_test.go and docs/connector-howto.md,
// which records its length: httpsource.go, without this doc.go, is at most
// 100 lines).
//
// The protocol: GET <url>?cursor=c returns a JSON [Page]: the items after
// cursor c ("" is the start) and the cursor of the next page. A page
// without items means the endpoint has nothing more for now; a bounded
// source ends the endpoint there, an unbounded one asks again after
// PollInterval.
//
// A page is the unit of progress: the reader fetches one page per request
// and emits it as one element, whose position is the page's next cursor, so
// every snapshot holds a cursor the API can resume from (see the
// "unit of a snapshot" in package readerbase).
package httpsource
