#!/usr/bin/env python3
"""Parse every line of an nvprobe `--format otlp-json` file with the official
OTLP protobuf definitions (opentelemetry-proto's LogsData, through
protobuf's JSON mapping; an unknown field is an error) and print what the
test checks as one JSON object: line count, record types, severities, the
resource attribute keys, and for each event.name the first record's
resource and attributes as plain values."""
import json
import sys

from google.protobuf import json_format
from opentelemetry.proto.logs.v1.logs_pb2 import LogsData


def plain(v):
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [plain(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: plain(kv.value) for kv in v.kvlist_value.values}
    return None


out = {"lines": 0, "types": {}, "severities": {}, "resource_keys": [], "first": {}}
keys = set()
with open(sys.argv[1], encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
        m = LogsData()
        try:
            json_format.Parse(line, m)
        except json_format.ParseError as e:
            sys.exit(f"line {n}: not an OTLP LogsData: {e}")
        out["lines"] += 1
        for rl in m.resource_logs:
            res = {kv.key: plain(kv.value) for kv in rl.resource.attributes}
            keys.update(res)
            for sl in rl.scope_logs:
                if sl.scope.name != "nvprobe":
                    sys.exit(f"line {n}: scope {sl.scope.name!r}")
                for r in sl.log_records:
                    attrs = {kv.key: plain(kv.value) for kv in r.attributes}
                    name = attrs.get("event.name", "?")
                    out["types"][name] = out["types"].get(name, 0) + 1
                    sev = f"{r.severity_text}/{r.severity_number}"
                    out["severities"][sev] = out["severities"].get(sev, 0) + 1
                    if r.time_unix_nano == 0:
                        sys.exit(f"line {n}: no time")
                    out["first"].setdefault(
                        name,
                        {
                            "resource": res,
                            "attributes": attrs,
                            "body": r.body.string_value,
                            "time_unix_nano": r.time_unix_nano,
                        },
                    )
out["resource_keys"] = sorted(keys)
print(json.dumps(out))
