package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// avroCodec decodes and encodes values in the Confluent wire format. One
// per worker (not safe for concurrent use).
type avroCodec struct {
	cl      *sr.Client
	schemas map[int]avro.Schema
}

func newAvroCodec(url string) (*avroCodec, error) {
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		return nil, fmt.Errorf("schema registry %s: %w", url, err)
	}
	return &avroCodec{cl: cl, schemas: map[int]avro.Schema{}}, nil
}

// recode decodes v's Avro payload into a map[string]any and encodes it
// again behind v's header.
func (a *avroCodec) recode(ctx context.Context, v []byte) ([]byte, error) {
	if len(v) < 5 || v[0] != 0 {
		return nil, errors.New("not in the Confluent wire format (magic byte 0, 4-byte schema id)")
	}
	id := int(binary.BigEndian.Uint32(v[1:5]))
	s, ok := a.schemas[id]
	if !ok {
		got, err := a.cl.SchemaByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("schema %d: %w", id, err)
		}
		if s, err = avro.Parse(got.Schema); err != nil {
			return nil, fmt.Errorf("schema %d: %w", id, err)
		}
		a.schemas[id] = s
	}
	var m map[string]any
	if err := avro.Unmarshal(s, v[5:], &m); err != nil {
		return nil, err
	}
	body, err := avro.Marshal(s, m)
	if err != nil {
		return nil, err
	}
	return append(v[:5:5], body...), nil
}
