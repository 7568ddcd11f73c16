package postgres

import (
	"encoding/json"
	"time"
)

// Debezium returns the change in Debezium's JSON envelope (the value of a
// Debezium PostgreSQL connector's record without the schema part):
//
//	{"before": {…}|null, "after": {…}|null, "op": "c|u|d|r",
//	 "source": {"version", "connector": "postgresql", "name", "ts_ms",
//	            "snapshot": "true"|"false", "db", "schema", "table",
//	            "txId", "lsn"},
//	 "ts_ms": …}
//
// name is the source block's logical server name. Values are encoded as
// JSON encodes the row images' Go values: numeric as a JSON number,
// timestamps as RFC 3339 strings (Debezium's default is epoch
// microseconds), bytea as base64 (as Debezium's default). db is not known
// from the change and is left empty.
func (c Change) Debezium(name string) ([]byte, error) { return c.debezium(name) }

func (c Change) debezium(name string) ([]byte, error) {
	schema, table := splitName(c.Table)
	snapshot := "false"
	if c.Op == OpRead {
		snapshot = "true"
	}
	src := map[string]any{
		"version":   "sluice",
		"connector": "postgresql",
		"name":      name,
		"ts_ms":     c.CommitTime.UnixMilli(),
		"snapshot":  snapshot,
		"db":        "",
		"schema":    schema,
		"table":     table,
		"txId":      nil,
		"lsn":       nil,
	}
	if c.Op != OpRead {
		src["txId"] = c.Xid
		src["lsn"] = c.LSN
	} else {
		src["ts_ms"] = time.Now().UnixMilli()
	}
	env := map[string]any{
		"before": nilMap(c.Before),
		"after":  nilMap(c.After),
		"op":     c.Op.String(),
		"source": src,
		"ts_ms":  time.Now().UnixMilli(),
	}
	return json.Marshal(env)
}

func nilMap(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func splitName(n string) (schema, table string) {
	for i := 0; i < len(n); i++ {
		if n[i] == '.' {
			return n[:i], n[i+1:]
		}
	}
	return "", n
}
