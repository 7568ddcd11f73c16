// Package s3 connects sluice to S3-compatible object storage (AWS S3,
// versitygw, Ceph RGW, …) with aws-sdk-go-v2: the file connector's sink
// writes s3:// part files, and its source reads them.
//
// # File sink
//
// [Client.Store] is a file.ObjectStore: with file.WithObjectStore a file
// sink ([file.NewRowSink], [file.NewBulkSink]) writes each part file as a
// multipart upload. Parts are uploaded as the writer's part buffer fills
// ([PartSize], default 8 MiB; the client reuses the buffers of prepared
// and aborted uploads); at every checkpoint the writer uploads the
// rest as the last part and hands the prepared upload — its id and part
// ETags — to the checkpoint as the committable. When the checkpoint
// completes, the committer completes the upload, which makes the object
// appear atomically. Recovery from checkpoint n completes n's uploads again
// (an upload S3 no longer knows whose object exists counts as completed, a
// HEAD), and aborts this job's unfinished uploads made after n, found by
// listing the multipart uploads under the sink's prefix; so after a crash
// and a restore no incomplete upload of the job is left behind and every
// record is in exactly one object.
//
// # File source
//
// [Client.FS] is a file.SourceFS of s3:// URLs (file.WithSourceFS): a
// path names an object, a "directory" (every object under path/), or a
// glob (path.Match per key element). Objects are read with GETs from the
// split's byte offset, so a restored split resumes with a ranged read;
// formats that read a footer (Parquet) use ranged ReadAt. A read fails
// rather than mix versions if the object changes while it is read
// (If-Match on the ETag).
//
// # Checkpoints and their lock
//
// [Client.CheckpointStorage] is a checkpoint.Storage under an s3:// prefix
// (conditional PUT of _metadata as the atomic publish; never a silent
// fallback to an older checkpoint). [CheckpointStorage.Lock] takes the
// prefix's lock object, _lock, with a conditional create
// (If-None-Match: *); it records the holder (a random owner id, host,
// pid) and a goroutine renews it every TTL/4 with a conditional replace
// (If-Match on its ETag) until the last unlock deletes it. A second
// process fails at Lock with a [*LockedError] naming the prefix and the
// holder. A lock not renewed for the TTL ([LockTTL], default
// [DefaultLockTTL], 30 s; measured on the server's clock: Date against
// Last-Modified) is stale and is taken over with If-Match on its ETag,
// so of two takers one wins. A holder whose renewal is refused (taken
// over) or that could not renew for TTL/2 has lost the lock: Save fails
// with [ErrLockLost] from then on (it also checks the lock object before
// each publish) and [OnLockLost] is called. Lock probes once that the
// server refuses conditional PUTs that must fail, and fails with
// [ErrNoConditionalWrites] otherwise ([NoLock] runs without the lock).
//
// # Configuration
//
// [New] takes options with these defaults: [Endpoint] from
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (else AWS), [Region] from
// AWS_REGION or AWS_DEFAULT_REGION (else us-east-1), [PathStyle] true,
// [Credentials] from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN ([SessionToken] with explicit keys), [PartSize]
// 8 MiB. An error about refused credentials names the endpoint, never
// the keys. Request checksums are sent only
// when S3 requires them, which every S3-compatible server accepts.
package s3
