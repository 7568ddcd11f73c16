// Package opensearch is sluice's OpenSearch connector: a bulk sink with
// exactly-once results through deterministic document ids, and a bounded
// source that reads an index through a point in time in parallel slices.
// It talks HTTP through opensearch-go's client (github.com/opensearch-project/opensearch-go/v4),
// with that client's own retries off: the connector retries with its own
// bounded, jittered backoff and counts what it retries.
//
// # Sink
//
// [NewSink] takes a document function that turns each record into an
// [Action]: an operation ([Index], [Create], [Update] as doc_as_upsert,
// [Delete]), an index (see [IndexPattern] for event-time names such as
// "logs-{yyyy.MM.dd}"), an id, routing, an ingest pipeline and, optionally,
// an external version. Each writer fills bulk requests (NDJSON) up to
// [BulkActions] or [BulkBytes], or for [FlushInterval], and sends one while
// the next fills; at most [MaxInFlightRequests] are unanswered, so a slow
// cluster slows the job down rather than filling memory. At every
// checkpoint the writer sends what it holds and waits until every request
// is answered and every document settled: a checkpoint completes only
// with everything before it acknowledged.
//
// Exactly-once results come from idempotence, not transactions: with an id
// on every action (required under [ExactlyOnce], the default), a replay
// after a failure rewrites the same documents, so the index ends with each
// record once, holding its last version. This holds for index, create
// (a replayed create that finds its document counts as written), update
// and delete with ids. Actions without ids (OpenSearch generates one) are
// at-least-once only: declare them with [AutoIDs] and
// DeliveryGuarantee(AtLeastOnce); NewSink refuses AutoIDs with
// ExactlyOnce, and an action without an id under ExactlyOnce fails the job
// with an error naming its index. A document is visible as soon as its
// bulk request succeeded, before the checkpoint completes. With external
// versions (Action.ExternalVersion, e.g. the Kafka offset) a replayed older
// version never overwrites a newer document.
//
// Requests that fail with a connection error, a timeout or status 429,
// 502, 503 or 504 are retried ([MaxTries], default 10, [Backoff], default
// 200ms doubling to 30s with jitter: about 40–80 s in all, enough for a
// node restart). Documents rejected with 429 or 5xx are sent again alone.
// Documents rejected for good (mapping, parse, version conflict) go to the
// [OnItemFailure] policy: [Fail] the job with an [*ItemError] naming
// index, id, operation, status, type and reason (default), [DeadLetter]
// them to a function ([DeadLetterTo]), or [Drop] and count them.
//
// TLS ([TLS], [CAFile]; [InsecureSkipVerify] only when asked), basic
// authentication and API keys ([BasicAuth], [APIKey]) apply to the sink and
// the source ([ConnOption]). Passwords and keys never appear in errors or
// logs.
//
// Writers report, in their metric group: numBulkRequests, numBulkRetries,
// numItemRetries, numRejectedItems (429 per document),
// numRecordsSendErrors (documents rejected for good), numRecordsDropped,
// numRecordsDeadLettered, numVersionConflictsSkipped (replays found
// written), numBytesOut and the gauge lastBulkLatencyMs; the runtime
// counts numRecordsSend.
//
// # Source
//
// [NewSource] opens a point in time on an index, alias or pattern and
// makes one split per slice ([Slices], default 4). A reader reads its
// slice in pages ([PageSize]) sorted by (_doc, _id) with search_after; the
// split's position is the last emitted hit's sort values, so a restored
// split resumes after it. Hits carry index, id, the raw _source and the
// sort values. The point in time lives [KeepAlive] after the last page
// (default 10m); [Source.Close] deletes it.
//
// # Elasticsearch
//
// One connector serves both: [ServerFlavor] picks the client library.
// [FlavorAuto] (the default) asks the node's root endpoint when a writer
// or the source connects: version.distribution "opensearch" is
// OpenSearch (opensearch-go), anything else Elasticsearch
// (github.com/elastic/go-elasticsearch/v8, which refuses servers that do
// not say they are Elasticsearch). Both sit behind one small internal
// interface (bulk, point in time and search, info). The sink's _bulk
// requests are the same for both; the source opens Elasticsearch's point
// in time (POST /<index>/_pit) and sorts a slice by _shard_doc, where
// OpenSearch's is POST /<index>/_search/point_in_time sorted by (_doc,
// _id). The real-node tests run against OpenSearch 2.19.6 and
// Elasticsearch 8.19.21 (scripts/opensearch.sh, scripts/elasticsearch.sh);
// the TLS and authentication tests and the node-restart test run against
// OpenSearch only.
package opensearch
