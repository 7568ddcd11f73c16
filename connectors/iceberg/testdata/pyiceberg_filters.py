"""Reads a table of connectors/iceberg's TestParquetGoDataFiles with
PyIceberg: all of it, then one scan per filter "col >= value", each
against the count the test expects. PyIceberg prunes data files with the
manifest's bounds and reads the Parquet columns by field id, so a wrong
bound or field id shows as missing rows or nulls.

usage: pyiceberg_filters.py SPEC (JSON: catalog, warehouse, table, rows,
filters: [{col, value, want}]); exits 1 on a mismatch.
"""
import json
import sys

from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import GreaterThanOrEqual


def main():
    spec = json.loads(sys.argv[1])
    cat = SqlCatalog("default", uri="sqlite:///" + spec["catalog"], warehouse=spec["warehouse"])
    tbl = cat.load_table(spec["table"])
    data = tbl.scan().to_arrow()
    bad = []
    if data.num_rows != spec["rows"]:
        bad.append("all rows: %d, want %d" % (data.num_rows, spec["rows"]))
    if data.column("l").null_count != 0:
        bad.append("required column l has nulls")
    out = {"rows": data.num_rows}
    for f in spec["filters"]:
        n = tbl.scan(row_filter=GreaterThanOrEqual(f["col"], f["value"])).to_arrow().num_rows
        out["%s>=%s" % (f["col"], f["value"])] = n
        if n != f["want"]:
            bad.append("%s >= %r: %d rows, want %d" % (f["col"], f["value"], n, f["want"]))
    print(json.dumps(out))
    if bad:
        print("\n".join(bad))
        sys.exit(1)


if __name__ == "__main__":
    main()
