package srtest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-io/sluice/internal/srtest"
)

const (
	userV1 = `{"type":"record","name":"User","namespace":"sluice.test","fields":[
		{"name":"id","type":"long"}]}`
	// userV1Spaced is userV1 with other whitespace: the same schema.
	userV1Spaced = `{ "type": "record", "name": "User", "namespace": "sluice.test",
		"fields": [ { "name": "id", "type": "long" } ] }`
	// userV2 adds an optional field with a default: BACKWARD compatible.
	userV2 = `{"type":"record","name":"User","namespace":"sluice.test","fields":[
		{"name":"id","type":"long"},
		{"name":"email","type":["null","string"],"default":null}]}`
	// userBad adds a field without a default: a reader of this schema
	// cannot read data written with v2, so BACKWARD refuses it.
	userBad = `{"type":"record","name":"User","namespace":"sluice.test","fields":[
		{"name":"id","type":"long"},
		{"name":"email","type":["null","string"],"default":null},
		{"name":"age","type":"int"}]}`
	// userV3 adds a second optional field: compatible with v2.
	userV3 = `{"type":"record","name":"User","namespace":"sluice.test","fields":[
		{"name":"id","type":"long"},
		{"name":"email","type":["null","string"],"default":null},
		{"name":"age","type":["null","int"],"default":null}]}`
)

func client(t *testing.T) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(srtest.URL(t)), sr.HTTPClient(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatalf("sr.NewClient: %v", err)
	}
	return cl
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sameAvro fails the test unless got parses as the Avro schema want (same
// canonical form: the registry may return the text reformatted).
func sameAvro(t *testing.T, what, got, want string) {
	t.Helper()
	g, err := avro.Parse(got)
	if err != nil {
		t.Fatalf("%s: the registry returned a schema that does not parse: %v\n%s", what, err, got)
	}
	w := avro.MustParse(want)
	if g.Fingerprint() != w.Fingerprint() {
		t.Fatalf("%s: schema is\n%s\nwant\n%s", what, g.String(), w.String())
	}
}

// responseError fails the test unless err is a registry error response with
// that HTTP status and Confluent error code.
func responseError(t *testing.T, what string, err error, status, code int) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("%s: error %v (%T), want a *sr.ResponseError", what, err, err)
	}
	if re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("%s: HTTP %d error_code %d (%s), want HTTP %d error_code %d", what, re.StatusCode, re.ErrorCode, re.Raw, status, code)
	}
}

// deleteSubject removes the subject when the test ends: soft, then hard
// delete, as Confluent's registry requires.
func deleteSubject(t *testing.T, cl *sr.Client, subject string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cl.DeleteSubject(ctx, subject, sr.SoftDelete); err != nil {
			t.Errorf("soft delete %s: %v", subject, err)
			return
		}
		if _, err := cl.DeleteSubject(ctx, subject, sr.HardDelete); err != nil {
			t.Errorf("hard delete %s: %v", subject, err)
		}
	})
}

// TestAvroSubjectLifecycle is the smoke test of the real registry through
// franz-go's client: register an Avro schema and a compatible v2, look both
// up by id and by version, list subjects and versions, and have an
// incompatible change refused under BACKWARD compatibility.
func TestAvroSubjectLifecycle(t *testing.T) {
	cl := client(t)
	ctx := testContext(t)
	subject := srtest.Subject(t, "-value")
	deleteSubject(t, cl, subject)

	v1, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatalf("register v1: %v", err)
	}
	if v1.Subject != subject || v1.Version != 1 || v1.ID <= 0 {
		t.Fatalf("register v1: got subject %q version %d id %d, want %q, 1, a positive id", v1.Subject, v1.Version, v1.ID, subject)
	}
	// Registering the same schema again (even spelled differently) returns
	// its id and makes no new version.
	for _, s := range []string{userV1, userV1Spaced} {
		id, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: s}, -1, -1)
		if err != nil {
			t.Fatalf("register v1 again: %v", err)
		}
		if id != v1.ID {
			t.Fatalf("register v1 again: id %d, want %d", id, v1.ID)
		}
	}

	// BACKWARD, set on the subject through the config endpoint.
	for _, r := range cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if r.Err != nil {
			t.Fatalf("set compatibility: %v", r.Err)
		}
	}
	for _, r := range cl.Compatibility(ctx, subject) {
		if r.Err != nil || r.Level != sr.CompatBackward {
			t.Fatalf("compatibility of %s: %v, %v; want BACKWARD", subject, r.Level, r.Err)
		}
	}

	v2, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: userV2})
	if err != nil {
		t.Fatalf("register v2 (new optional field): %v", err)
	}
	if v2.Version != 2 || v2.ID == v1.ID {
		t.Fatalf("register v2: version %d id %d, want version 2 and an id other than v1's %d", v2.Version, v2.ID, v1.ID)
	}

	// Look both up by id.
	for _, c := range []struct {
		id   int
		want string
	}{{v1.ID, userV1}, {v2.ID, userV2}} {
		s, err := cl.SchemaByID(ctx, c.id)
		if err != nil {
			t.Fatalf("schema by id %d: %v", c.id, err)
		}
		if s.Type != sr.TypeAvro {
			t.Errorf("schema by id %d: type %v, want AVRO", c.id, s.Type)
		}
		sameAvro(t, "schema by id", s.Schema, c.want)
	}
	// … by version, and latest (-1).
	for _, c := range []struct {
		version, wantVersion, wantID int
		want                         string
	}{{1, 1, v1.ID, userV1}, {2, 2, v2.ID, userV2}, {-1, 2, v2.ID, userV2}} {
		ss, err := cl.SchemaByVersion(ctx, subject, c.version)
		if err != nil {
			t.Fatalf("schema by version %d: %v", c.version, err)
		}
		if ss.Subject != subject || ss.Version != c.wantVersion || ss.ID != c.wantID {
			t.Fatalf("schema by version %d: %q v%d id %d, want %q v%d id %d", c.version, ss.Subject, ss.Version, ss.ID, subject, c.wantVersion, c.wantID)
		}
		sameAvro(t, "schema by version", ss.Schema.Schema, c.want)
	}
	// … and by content (POST /subjects/{subject}).
	found, err := cl.LookupSchema(ctx, subject, sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatalf("lookup v1: %v", err)
	}
	if found.Version != 1 || found.ID != v1.ID {
		t.Fatalf("lookup v1: version %d id %d, want 1 and %d", found.Version, found.ID, v1.ID)
	}

	// List subjects and versions.
	subjects, err := cl.Subjects(ctx)
	if err != nil {
		t.Fatalf("subjects: %v", err)
	}
	if !slices.Contains(subjects, subject) {
		t.Fatalf("subjects %v do not hold %s", subjects, subject)
	}
	versions, err := cl.SubjectVersions(ctx, subject)
	if err != nil {
		t.Fatalf("versions: %v", err)
	}
	if !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("versions %v, want [1 2]", versions)
	}

	// An incompatible change is refused: HTTP 409, error_code 409.
	_, err = cl.RegisterSchema(ctx, subject, sr.Schema{Schema: userBad}, -1, -1)
	responseError(t, "register an incompatible schema", err, http.StatusConflict, sr.ErrIncompatibleSchema.Code)
	var re *sr.ResponseError
	if errors.As(err, &re) && re.SchemaError() != sr.ErrIncompatibleSchema {
		t.Errorf("SchemaError() = %v, want ErrIncompatibleSchema", re.SchemaError())
	}
	check, err := cl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: userBad})
	if err != nil || check.Is {
		t.Fatalf("check compatibility of the incompatible schema: %+v, %v; want not compatible", check, err)
	}
	check, err = cl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: userV3})
	if err != nil || !check.Is {
		t.Fatalf("check compatibility of v3 (another optional field): %+v, %v; want compatible", check, err)
	}
	if versions, err = cl.SubjectVersions(ctx, subject); err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("versions after the refused change: %v, %v; want [1 2]", versions, err)
	}
}

// TestSchemaIDsAreShared: the same schema under two subjects has one id,
// as in Confluent's registry (ids name schemas, not subject versions), and
// the id lists both subjects.
func TestSchemaIDsAreShared(t *testing.T) {
	cl := client(t)
	ctx := testContext(t)
	a, b := srtest.Subject(t, "-a-value"), srtest.Subject(t, "-b-value")
	deleteSubject(t, cl, a)
	deleteSubject(t, cl, b)
	ida, err := cl.RegisterSchema(ctx, a, sr.Schema{Schema: userV1}, -1, -1)
	if err != nil {
		t.Fatalf("register under %s: %v", a, err)
	}
	idb, err := cl.RegisterSchema(ctx, b, sr.Schema{Schema: userV1}, -1, -1)
	if err != nil {
		t.Fatalf("register under %s: %v", b, err)
	}
	if ida != idb {
		t.Fatalf("the same schema has id %d under %s and %d under %s", ida, a, idb, b)
	}
	uses, err := cl.SchemaVersionsByID(ctx, ida)
	if err != nil {
		t.Fatalf("versions of id %d: %v", ida, err)
	}
	for _, s := range []string{a, b} {
		if !slices.Contains(uses, sr.SubjectVersion{Subject: s, Version: 1}) {
			t.Errorf("id %d is used by %v, want %s version 1 among them", ida, uses, s)
		}
	}
}

// TestSchemaTypesAndReferences: JSON Schema and Protobuf schemas keep their
// type, and an Avro schema that references another keeps its references.
func TestSchemaTypesAndReferences(t *testing.T) {
	cl := client(t)
	ctx := testContext(t)

	types, err := cl.SupportedTypes(ctx)
	if err != nil {
		t.Fatalf("supported types: %v", err)
	}
	for _, want := range []sr.SchemaType{sr.TypeAvro, sr.TypeJSON, sr.TypeProtobuf} {
		if !slices.Contains(types, want) {
			t.Errorf("supported types %v lack %v", types, want)
		}
	}

	for _, c := range []sr.Schema{
		{Type: sr.TypeJSON, Schema: `{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}`},
		{Type: sr.TypeProtobuf, Schema: "syntax = \"proto3\";\npackage sluice.test;\n\nmessage User {\n  int64 id = 1;\n  string email = 2;\n}\n"},
	} {
		subject := srtest.Subject(t, "-"+c.Type.String()+"-value")
		deleteSubject(t, cl, subject)
		ss, err := cl.CreateSchema(ctx, subject, c)
		if err != nil {
			t.Fatalf("register %v: %v", c.Type, err)
		}
		got, err := cl.SchemaByID(ctx, ss.ID)
		if err != nil {
			t.Fatalf("%v schema by id %d: %v", c.Type, ss.ID, err)
		}
		if got.Type != c.Type || got.Schema != c.Schema {
			t.Fatalf("%v schema by id: type %v text\n%s\nwant the text as registered", c.Type, got.Type, got.Schema)
		}
	}

	addr, person := srtest.Subject(t, "-addr-value"), srtest.Subject(t, "-person-value")
	// The referencing subject goes first: a referenced version cannot be
	// deleted while a reference to it exists.
	deleteSubject(t, cl, addr)
	deleteSubject(t, cl, person)
	if _, err := cl.CreateSchema(ctx, addr, sr.Schema{Schema: `{"type":"record","name":"Addr","namespace":"sluice.test","fields":[{"name":"city","type":"string"}]}`}); err != nil {
		t.Fatalf("register the referenced schema: %v", err)
	}
	refs := []sr.SchemaReference{{Name: "sluice.test.Addr", Subject: addr, Version: 1}}
	p, err := cl.CreateSchema(ctx, person, sr.Schema{
		Schema:     `{"type":"record","name":"Person","namespace":"sluice.test","fields":[{"name":"addr","type":"sluice.test.Addr"}]}`,
		References: refs,
	})
	if err != nil {
		t.Fatalf("register a schema with a reference: %v", err)
	}
	got, err := cl.SchemaByID(ctx, p.ID)
	if err != nil {
		t.Fatalf("schema with a reference by id %d: %v", p.ID, err)
	}
	if !slices.Equal(got.References, refs) {
		t.Fatalf("references by id: %+v, want %+v", got.References, refs)
	}
}

// TestNotFound: what a client sees for what is not there — Confluent's
// status codes and error codes.
func TestNotFound(t *testing.T) {
	cl := client(t)
	ctx := testContext(t)
	subject := srtest.Subject(t, "-value")
	_, err := cl.SubjectVersions(ctx, subject)
	responseError(t, "versions of an unknown subject", err, http.StatusNotFound, sr.ErrSubjectNotFound.Code)
	_, err = cl.SchemaByID(ctx, 1<<30)
	responseError(t, "an unknown schema id", err, http.StatusNotFound, sr.ErrSchemaNotFound.Code)

	deleteSubject(t, cl, subject)
	if _, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: userV1}, -1, -1); err != nil {
		t.Fatalf("register: %v", err)
	}
	_, err = cl.SchemaByVersion(ctx, subject, 7)
	responseError(t, "an unknown version", err, http.StatusNotFound, sr.ErrVersionNotFound.Code)
	_, err = cl.RegisterSchema(ctx, subject, sr.Schema{Schema: `{"type":"record","name":`}, -1, -1)
	responseError(t, "an Avro schema that does not parse", err, http.StatusUnprocessableEntity, sr.ErrInvalidSchema.Code)
}
