package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/twmb/franz-go/pkg/sr"
)

// avroSchema is the writer schema of the Avro input: the fields of the
// JSON input, in the same order.
const avroSchema = `{"type":"record","name":"BenchRecord","namespace":"io.sluice.bench","fields":[` +
	`{"name":"amount","type":"long"},{"name":"id","type":"long"},{"name":"pad","type":"string"},{"name":"user","type":"string"}]}`

// avroHeader is the Confluent wire format's header: magic byte 0 and the
// schema id, big-endian.
const avroHeader = 5

// avroValue returns record i's value in the Confluent wire format with
// schema id: the same fields as value, padded so that the value has about
// size bytes (exactly, unless a length's varint grows by a byte).
func avroValue(dst []byte, i, size, id int) []byte {
	user := fmt.Sprintf("user-%d", i%10)
	head := func(b []byte) []byte {
		b = append(b, 0)
		b = binary.BigEndian.AppendUint32(b, uint32(id))
		b = binary.AppendVarint(b, int64(i*37%1000))
		return binary.AppendVarint(b, int64(i))
	}
	fixed := len(head(nil)) + len(binary.AppendVarint(nil, int64(len(user)))) + len(user)
	n := 0
	for fixed+len(binary.AppendVarint(nil, int64(n)))+n < size {
		n++
	}
	dst = head(dst[:0])
	dst = binary.AppendVarint(dst, int64(n))
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst = append(dst, padChars[x%uint64(len(padChars))])
	}
	dst = binary.AppendVarint(dst, int64(len(user)))
	return append(dst, user...)
}

// registerAvro registers the input's schema under subject and returns its
// id; registering the same schema again returns the same id.
func registerAvro(ctx context.Context, url, subject string) (int, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return 0, err
	}
	ss, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: avroSchema, Type: sr.TypeAvro})
	if err != nil {
		return 0, fmt.Errorf("registering the Avro schema under %s at %s: %w", subject, url, err)
	}
	return ss.ID, nil
}

// writeAvroSchema writes the schema into the work directory for the
// pipelines (AVRO_SCHEMA_FILE) and returns its path.
func writeAvroSchema(work string) (string, error) {
	path := filepath.Join(work, "bench-record.avsc")
	return path, os.WriteFile(path, []byte(avroSchema), 0o644)
}
