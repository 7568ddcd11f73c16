"""Reads an Iceberg table with PyIceberg (the independent reader of
cmd/sluice/iceberg_test.go) and prints it as one JSON object:
{"rows": [[col, ...], ...], "columns": [...], "snapshots": [...], "files": [...],
"location": "..."}: every snapshot with the data files its own manifests
add and delete ("added", "deleted"; read from each manifest once), and
the data files the current snapshot references ("files").

usage: iceberg_read.py CATALOG_URI WAREHOUSE TABLE [key=value ...]
CATALOG_URI is a SQLAlchemy URL (sqlite:////path/catalog.db) or a REST
catalog's URL (http://127.0.0.1:PORT; WAREHOUSE may then be empty); the
extra key=value pairs are catalog properties (s3.endpoint, ...).
"""
import json
import sys

from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestEntryStatus


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
    # The data files each snapshot added and deleted: the entries of the
    # manifests it wrote (a manifest is listed again by every later
    # snapshot; it is read once).
    added, deleted, manifests = {}, {}, set()
    for s in tbl.snapshots():
        for m in s.manifests(tbl.io):
            if m.manifest_path in manifests:
                continue
            manifests.add(m.manifest_path)
            for e in m.fetch_manifest_entry(tbl.io, discard_deleted=False):
                if e.status == ManifestEntryStatus.ADDED:
                    added.setdefault(e.snapshot_id, []).append(e.data_file.file_path)
                elif e.status == ManifestEntryStatus.DELETED:
                    deleted.setdefault(e.snapshot_id, []).append(e.data_file.file_path)
    snaps = []
    for s in tbl.snapshots():
        summ = s.summary
        snaps.append({
            "id": s.snapshot_id,
            "parent": s.parent_snapshot_id,
            "operation": str(summ.operation.value) if summ is not None else "",
            "props": dict(summ.additional_properties) if summ is not None else {},
            "added": added.get(s.snapshot_id, []),
            "deleted": deleted.get(s.snapshot_id, []),
        })
    files = tbl.inspect.files().column("file_path").to_pylist() if tbl.current_snapshot() else []
    json.dump({"columns": cols, "rows": rows, "snapshots": snaps, "files": files,
               "location": tbl.location()}, sys.stdout)


if __name__ == "__main__":
    main()
