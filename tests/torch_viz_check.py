#!/usr/bin/env python3
"""torch_viz_check.py ORIG EXPORT [ORIG EXPORT ...] - PyTorch's own snapshot reader
(torch.cuda._memory_viz: `stats` prints segsum(), `trace` prints trace()) on each original
and on hbm's export of it: the printed figures must be equal. One process for all pairs
(importing torch once), calling the functions the `stats` and `trace` commands print.

Both are compared as printed: `trace` prints entries of actions it does not format
(segment_map, a "snapshot" marker, ...) as the whole dict, keys such as "compile_context"
and every frame included. Prints one line per pair and the count; exit 1 if any differs.
--totals VIEW_JSON PERFETTO EXPORT: an export of a trace that is not a snapshot (totals())."""
import pickle
import sys

from torch.cuda import _memory_viz as mv


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"line {i + 1}: {x[:160]!r} vs {y[:160]!r}"
    return f"{len(a)} lines vs {len(b)}"


def main(args):
    if args and args[0] == "--totals":
        return totals(args[1], args[2], args[3])
    same = 0
    pairs = list(zip(args[0::2], args[1::2]))
    for orig, exp in pairs:
        a, b = (pickle.load(open(p, "rb")) for p in (orig, exp))
        why = []
        sa, sb = mv.segsum(a).splitlines(), mv.segsum(b).splitlines()
        if sa != sb:
            why.append("stats " + first_diff(sa, sb))
        ta, tb = mv.trace(a).splitlines(), mv.trace(b).splitlines()
        if ta != tb:
            why.append("trace " + first_diff(ta, tb))
        print(f"{orig}: {'equal' if not why else 'DIFFERS: ' + '; '.join(why)}")
        same += not why
    print(f"memory_viz stats and trace equal on {same} of {len(pairs)}")
    return same == len(pairs)


def totals(view_json, perfetto, exp):
    """An export of a trace that is not a snapshot (its blocks are the PyTorch allocator
    twin's) read by memory_viz: segsum accepts it (it asserts that the blocks add up), its
    total_allocated is hbm's bytes in use at the end of the trace (the last "in use" counter
    of hbm's perfetto export: the curve hbm view draws, live-before blocks included), and
    `trace` prints as many allocs, frees and OOMs as hbm view --json counts, each alloc in a
    segment (the history is the twin's too: its addresses and segment events)."""
    import json
    import re
    want = json.load(open(view_json))
    if "allocs" not in want:  # an XProf profile's view: its first allocator (the one exported)
        a = want["allocators"][0]
        want = {"allocs": a["allocations"], "frees": a["deallocations"], "ooms": a.get("ooms", 0)}
    ev = json.load(open(perfetto))["traceEvents"]
    in_use = [e["args"]["bytes"] for e in ev if e.get("ph") == "C" and e["name"] == "in use"][-1]
    data = pickle.load(open(exp, "rb"))
    stats, tr = mv.segsum(data), mv.trace(data)
    shown = re.search(r"total_allocated: (\S+)", stats).group(1)
    alloc = sum(b["requested_size"] for s in data["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    got = {"allocs": len(re.findall(r"^\w+ = (?:MEM|seg_\d+|\w+)\[", tr, re.M)),
           "frees": tr.count("# free completed for "), "ooms": tr.count("raise OutOfMemoryError")}
    # every alloc of the history inside a segment of the file (the end state's, or one its
    # history allocates): the history is the twin's. (memory_viz's own trace names an alloc
    # "MEM" when it lies past an end-state segment's allocated_size, so it is not the test.)
    segs = [(s["address"], s["total_size"]) for s in data["segments"]]
    segs += [(e["addr"], e["size"]) for dev in data["device_traces"] for e in dev
             if e["action"] in ("segment_alloc", "segment_map")]
    outside = sum(1 for dev in data["device_traces"] for e in dev
                  if e["action"] == "alloc" and not any(a <= e["addr"] < a + n for a, n in segs))
    print(f"{exp}: memory_viz total_allocated {shown} ({alloc} bytes; hbm: {in_use} in use at the end), "
          f"trace {got}, hbm view allocs {want['allocs']} frees {want['frees']} ooms {want['ooms']}, "
          f"{outside} allocs outside the segments")
    return alloc == in_use and shown == repr(mv.Bytes(in_use)) and got == {k: want[k] for k in got} and not outside


if __name__ == "__main__":
    sys.exit(0 if main(sys.argv[1:]) else 1)
