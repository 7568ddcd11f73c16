"""Reads an Iceberg table with PyIceberg (the independent reader of
cmd/sluice/iceberg_test.go) and prints it as one JSON object:
{"rows": [[col, ...], ...], "columns": [...], "snapshots": [...], "files": [...]}.

usage: iceberg_read.py CATALOG_URI WAREHOUSE TABLE [key=value ...]
CATALOG_URI is a SQLAlchemy URL (sqlite:////path/catalog.db) or a REST
catalog's URL (http://127.0.0.1:PORT; WAREHOUSE may then be empty); the
extra key=value pairs are catalog properties (s3.endpoint, ...).
"""
import json
import sys

from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog


def main():
    uri, warehouse, ident = sys.argv[1:4]
    props = dict(kv.split("=", 1) for kv in sys.argv[4:])
    if uri.startswith("http://") or uri.startswith("https://"):
        if warehouse:
            props["warehouse"] = warehouse
        cat = RestCatalog("default", uri=uri, **props)
    else:
        cat = SqlCatalog("default", uri=uri, warehouse=warehouse, **props)
    tbl = cat.load_table(ident)
    data = tbl.scan().to_arrow()
    cols = data.column_names
    pyrows = data.to_pylist()
    rows = [[r[c] if not hasattr(r[c], "isoformat") else r[c].isoformat() for c in cols] for r in pyrows]
    snaps = []
    for s in tbl.snapshots():
        summ = s.summary
        snaps.append({
            "id": s.snapshot_id,
            "parent": s.parent_snapshot_id,
            "operation": str(summ.operation.value) if summ is not None else "",
            "props": dict(summ.additional_properties) if summ is not None else {},
        })
    files = tbl.inspect.files().column("file_path").to_pylist() if tbl.current_snapshot() else []
    json.dump({"columns": cols, "rows": rows, "snapshots": snaps, "files": files}, sys.stdout)


if __name__ == "__main__":
    main()
