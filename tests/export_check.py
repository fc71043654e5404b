#!/usr/bin/env python3
"""export_check.py - read hbm's exports back with independent readers (json, pickle,
gzip, a protobuf wire decoder written here) and compare with what the input says.

usage: export_check.py EXPECT.json PERFETTO PPROF TORCH MINIMALLOC
EXPECT.json: {"allocs": n, "alloc_bytes": b, "peak": p, "live_end": k, "ooms": o,
              "buffers": m, "ops": [names that must appear as pprof functions]}
"""
import csv
import gzip
import json
import pickle
import sys


def varint(b, i):
    v, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def fields(b):
    """Decode one protobuf message into [(field, wire, value)]."""
    out, i = [], 0
    while i < len(b):
        key, i = varint(b, i)
        f, w = key >> 3, key & 7
        if w == 0:
            v, i = varint(b, i)
        elif w == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif w == 1:
            v, i = b[i:i + 8], i + 8
        elif w == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % w)
        out.append((f, w, v))
    return out


def packed(b):
    vals, i = [], 0
    while i < len(b):
        v, i = varint(b, i)
        vals.append(v)
    return vals


def check_pprof(path, want):
    raw = gzip.open(path).read()
    msg = fields(raw)
    strings = [v.decode() for f, w, v in msg if f == 6]
    assert strings[0] == "", "string_table[0] must be empty"
    types = []
    for f, w, v in msg:
        if f == 1:
            d = {ff: vv for ff, ww, vv in fields(v)}
            types.append((strings[d[1]], strings[d[2]]))
    assert types == [("alloc_objects", "count"), ("alloc_space", "bytes"), ("inuse_objects", "count"),
                     ("inuse_space", "bytes")], types
    sums = [0, 0, 0, 0]
    locs = {}
    funcs = {}
    for f, w, v in msg:
        if f == 2:
            for ff, ww, vv in fields(v):
                if ff == 2:
                    for k, x in enumerate(packed(vv)):
                        sums[k] += x
                if ff == 1:
                    assert packed(vv), "a sample without a location"
        if f == 4:
            d = fields(v)
            locs[[vv for ff, ww, vv in d if ff == 1][0]] = d
        if f == 5:
            d = {ff: vv for ff, ww, vv in fields(v)}
            funcs[d[1]] = strings[d[2]]
    assert sums[0] == want["allocs"], (sums, want)
    assert sums[1] == want["alloc_bytes"], (sums, want)
    assert sums[3] == want["peak"], (sums, want)
    for op in want.get("ops", []):
        assert op in funcs.values(), (op, funcs)
    for f, w, v in msg:  # every location id a sample names exists
        if f == 2:
            for ff, ww, vv in fields(v):
                if ff == 1:
                    for lid in packed(vv):
                        assert lid in locs, lid
    dflt = [v for f, w, v in msg if f == 14]
    assert dflt and strings[dflt[0]] == "inuse_space"


def main():
    want = json.load(open(sys.argv[1]))
    perf = json.load(open(sys.argv[2]))
    ev = perf["traceEvents"]
    inuse = [e["args"]["bytes"] for e in ev if e.get("ph") == "C" and e["name"] == "in use"]
    reserved = [e["args"]["bytes"] for e in ev if e.get("ph") == "C" and e["name"] == "reserved"]
    assert inuse and reserved, "counter tracks missing"
    assert max(inuse) == want["peak"], (max(inuse), want["peak"])
    assert max(reserved) >= max(inuse)
    ts = [e["ts"] for e in ev if "ts" in e]
    assert ts == sorted(ts), "timestamps go backwards"
    assert sum(1 for e in ev if e.get("ph") == "i" and e["name"] == "OOM") == want["ooms"]
    check_pprof(sys.argv[3], want)
    snap = pickle.load(open(sys.argv[4], "rb"))
    tr = snap["device_traces"][0]
    assert sum(1 for e in tr if e["action"] == "alloc") == want["allocs"]
    assert sum(1 for e in tr if e["action"] == "oom") == want["ooms"]
    for e in tr:
        assert set(e) >= {"action", "addr", "size", "stream", "time_us", "frames"}, e
    # a snapshot's "segments" are written back as read: the input's are empty
    assert snap["segments"] == [], snap["segments"][:1]
    rows = list(csv.reader(open(sys.argv[5])))
    assert rows[0] == ["id", "lower", "upper", "size"], rows[0]
    assert len(rows) - 1 == want["buffers"], (len(rows), want)
    for r in rows[1:]:
        assert int(r[1]) < int(r[2]) and int(r[3]) > 0, r
    print("exports read back: ok")


main()
