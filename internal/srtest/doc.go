// Package srtest lets tests find the real schema registry that the test
// command starts: Apicurio Registry (3.3.3 by default) with in-memory
// storage, run by scripts/schema-registry.sh on 127.0.0.1, spoken to
// through its Confluent-compatible API at
// http://127.0.0.1:PORT/apis/ccompat/v7 ($SLUICE_SCHEMA_REGISTRY).
//
// [URL] returns that base URL or skips the test; [Subject] names a subject
// no other test uses (every package's tests share one registry, and go test
// runs packages at once). By hand:
//
//	eval "$(scripts/schema-registry.sh start)"
//	go test ./internal/srtest/
//	scripts/schema-registry.sh stop
//
// The tests of this package are the smoke test of that registry through
// franz-go's client (github.com/twmb/franz-go/pkg/sr): register, look up by
// id, version and content, list, compatibility, references, types, errors.
//
// # Where the ccompat API differs from Confluent's
//
// Found against Apicurio Registry 3.3.3:
//
//   - The global compatibility level is NONE, not BACKWARD: the script sets
//     it to BACKWARD (PUT /config) at start, so tests see Confluent's
//     default.
//   - Soft delete, then hard delete (?permanent=true) of subjects and
//     versions works as in Confluent's registry; a hard delete without the
//     soft one is HTTP 409 with error_code 40405 (Confluent: 404, 40405).
//     Deleting a subject another schema references is HTTP 422 error_code
//     42206, as in Confluent's.
//   - Status codes and error_code values are Confluent's for what the tests
//     use: unknown subject 404/40401, unknown version 404/40402, unknown id
//     404/40403, incompatible schema 409/409, a schema that does not parse
//     422/42201, a bad compatibility level 422/42203. The message texts are
//     Apicurio's own (an incompatible schema's message starts with the Java
//     exception's class name); match on codes, never on messages.
//   - Schema ids are content ids, shared by every subject that registers
//     the same schema (as in Confluent's registry), but not dense: ids can
//     be skipped (registering the same schema spelled with other whitespace
//     returns the existing id yet uses up a new one). Never assume the next
//     id.
//   - POST /compatibility/... answers {"is_compatible": false} without
//     "messages", even with ?verbose=true.
//   - GET /config/{subject} for a subject without its own level answers 200
//     with the global level (Confluent: 404 error_code 40408 unless
//     ?defaultToGlobal=true). PUT /config/{subject} works for a subject that
//     has no schema yet.
//   - GET /schemas lists schema texts without subject, version or id, so
//     franz-go's AllSchemas returns SubjectSchemas with only the schema
//     set; list per subject (Subjects, then SubjectVersions or Schemas).
//   - schemaType values other than AVRO, JSON and PROTOBUF (e.g. "XML") are
//     accepted (Apicurio stores other artifact types); Confluent refuses them.
//   - GET /contexts answers [":.:"] (Confluent: ["."]).
//   - References ({"name","subject","version"}) are stored and returned by
//     GET /schemas/ids/{id} and GET /subjects/{s}/versions/{v} as in
//     Confluent's registry; GET /subjects/{s}/versions/{v}/referencedby
//     lists the referencing ids.
//
// Without Java 21 the script falls back to Apicurio Registry 2.6.13.Final
// (Java 17), whose ccompat API the same tests pass against once
// registry.ccompat.use-canonical-hash is on (the script sets it; without it
// 2.x makes a new version for a schema spelled with other whitespace).
package srtest
