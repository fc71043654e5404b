#!/usr/bin/env python3
"""callwalk.py - the rooms a call walk crosses, measured on the project's own build.

    scripts/callwalk.py BUILD [--entry FN ...] [--check] [--max-rooms N] [--library] [--source DIR]

BUILD is a CMake build folder of this tree (it holds compile_commands.json). Every unit of
src/ and tools/ is compiled again, as compile_commands.json says, with GCC's
-fcallgraph-info at -O0 (no inlining: the calls are the source's) into a temporary folder:
GCC writes a .ci file (VCG) per unit, with each function's definition (file:line) and each
call (caller -> callee). The units are joined by name (a static function is named with its
unit), and every call reachable from an entry is followed (default: hbm_replay_run_write,
the replay from the CLI's command down to its output, and cmd_replay, the CLI's command).

A room is a folder of src/ (trace/replay, trace/import, trace/export are rooms of their
own), or tools/ for the CLI. For each entry it prints the rooms reached, the moves between
rooms (caller room -> callee room, with how many calls), the walk: the most rooms one chain
of calls crosses, and every upward call: a call from a function defined in a lower room to
one defined in a higher room (FLOORS below). Calls through function pointers (an
allocator's policy ops, a sink's writer) are not seen by GCC's call graph: they are counted
and said, not followed. With --check it exits 1 when an entry makes an upward call or its
walk crosses more than --max-rooms rooms (default 6); 3 when the compiler cannot write the
call graph (clang, GCC before 10).

python3's standard library and gcc >= 10 only.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

# The floors, ground first: DESIGN.md's layer order (core < device < config < alloc < hlo <
# plan < fit/pack < trace < report < api < tools), placed by the real arrows where it leaves
# a choice. pack sits below plan: plan includes pack's headers (plan_pack.c packs a plan's
# temp buffers) and pack includes nothing of plan. timeline sits below pack: timeline includes
# core alone, pack reads timelines (hbm_pack_timeline) and trace.c includes
# timeline_internal.h. Inside trace/, the event model (trace/) is the floor under its
# importers and exporters (they build and read hbm_trace through trace_internal.h) and the
# replay engine (trace/replay/ includes trace/ and alloc/); hbm_trace_open, which dispatches
# to the importers, is their caller and lives in trace/import. integrations/ is beside api/
# (a front door of its own).
FLOORS = [
    ("core",),
    ("device",),
    ("config",),
    ("alloc",),
    ("hlo",),
    ("timeline",),
    ("pack",),
    ("plan",),
    ("fit",),
    ("trace",),
    ("trace/import", "trace/export"),
    ("trace/replay",),
    ("report",),
    ("api", "integrations"),
    ("tools",),
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
SUBROOMS = {"trace/import", "trace/export", "trace/replay"}
DEFAULT_ENTRIES = ["hbm_replay_run_write", "cmd_replay"]

NODE = re.compile(r'node: \{ title: "([^"]*)" label: "([^"\\]*)\\n([^"]*)"( shape : ellipse)? \}')
EDGE = re.compile(r'edge: \{ sourcename: "([^"]*)" targetname: "([^"]*)" label: "([^"]*)" \}')


def room_of(path, root):
    """The room of a source file (None: outside src/ and tools/, as libc's headers)."""
    rel = os.path.relpath(os.path.realpath(path), root)
    parts = rel.split(os.sep)
    if parts[0] == "tools":
        return "tools"
    if parts[0] != "src" or len(parts) < 3:
        return None
    sub = parts[1] + "/" + parts[2]
    return sub if sub in SUBROOMS else parts[1]


def units(build, root):
    """(file, argv) of each unit of src/ and tools/ in compile_commands.json."""
    path = os.path.join(build, "compile_commands.json")
    if not os.path.exists(path):
        sys.exit(f"callwalk: no {path} (configure the build with CMake first)")
    seen, out = set(), []
    for cmd in json.load(open(path)):
        f = os.path.realpath(os.path.join(cmd["directory"], cmd["file"]))
        rel = os.path.relpath(f, root)
        if not (rel.startswith("src" + os.sep) or rel.startswith("tools" + os.sep)) or f in seen:
            continue
        seen.add(f)
        argv = cmd.get("arguments") or shlex.split(cmd["command"])
        out.append((cmd["directory"], f, argv))
    return out


def compile_units(todo, tmp, jobs):
    """Compile each unit with -fcallgraph-info into tmp; the .ci files' paths."""
    def one(k):
        directory, f, argv = todo[k]
        args, skip = [argv[0]], False
        for a in argv[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-MF", "-MT", "-MQ"):
                skip = True
                continue
            if a in ("-MD", "-MMD", "-Werror", "-c", "-S") or a.startswith("-fsanitize") or a.startswith("-O") \
                    or a.startswith("-g") or a == f or os.path.realpath(os.path.join(directory, a)) == f:
                continue
            args.append(a)
        obj = os.path.join(tmp, "u%d.s" % k)  # -S: the call graph needs no assembler
        args += ["-O0", "-w", "-fcallgraph-info", "-S", f, "-o", obj]
        r = subprocess.run(args, cwd=directory, capture_output=True, text=True)
        if r.returncode and "callgraph-info" in r.stderr:
            print(f"callwalk: {argv[0]} has no -fcallgraph-info (GCC 10 or later has it): nothing measured")
            sys.exit(3)
        if r.returncode:
            sys.exit(f"callwalk: compiling {f} failed:\n{r.stderr}")
        return os.path.join(tmp, "u%d.ci" % k)
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        return list(ex.map(one, range(len(todo))))


def load(cis, root):
    """defs: name -> (file, line); calls: name -> [(callee, site)]; indirect: name -> [site]."""
    defs, calls, indirect = {}, {}, {}
    for ci in cis:
        text = open(ci).read()
        for title, _name, where, decl in NODE.findall(text):
            if decl:
                continue
            file, line = where.rsplit(":", 2)[0:2]
            defs.setdefault(title, (file, int(line)))
        for src, dst, site in EDGE.findall(text):
            if dst == "__indirect_call":
                indirect.setdefault(src, []).append(site)
            else:
                calls.setdefault(src, []).append((dst, site))
    return defs, calls, indirect


def short(name):
    return name.rsplit(":", 1)[-1]


def rel(path, root):
    return os.path.relpath(path, root)


def walk(entry, defs, calls, indirect, root):
    """Everything one entry reaches, and its figures."""
    room = {}
    for name, (file, _line) in defs.items():
        room[name] = room_of(file, root)
    starts = [n for n in defs if short(n) == entry and room.get(n)]
    if not starts:
        return None
    reached, stack = set(starts), list(starts)
    edges = []  # (caller, callee, site) between project functions
    while stack:
        f = stack.pop()
        for g, site in calls.get(f, ()):
            if g not in defs or not room.get(g):
                continue  # libc, or a function defined outside src/ and tools/
            edges.append((f, g, site))
            if g not in reached:
                reached.add(g)
                stack.append(g)
    moves, up = {}, []
    for f, g, site in edges:
        a, b = room[f], room[g]
        if a != b:
            moves[(a, b)] = moves.get((a, b), 0) + 1
            if FLOOR[a] < FLOOR[b]:
                up.append((f, g, site))
    n_indirect = sum(len(indirect.get(f, ())) for f in reached)
    # the walk: the most rooms one chain of calls crosses. The functions' strongly
    # connected parts (recursion) are taken whole; a chain counts 1 + its room changes.
    succ = {f: [] for f in reached}
    for f, g, _site in edges:
        succ[f].append(g)
    comp = scc(reached, succ)
    members = {}
    for f, c in comp.items():
        members.setdefault(c, []).append(f)
    # the parts in an order where every caller comes before its callees (Kahn), then the
    # longest chain from each, callees first
    down = {c: set() for c in members}
    for f, g, _site in edges:
        if comp[f] != comp[g]:
            down[comp[f]].add(comp[g])
    indeg = {c: 0 for c in members}
    for c in down:
        for y in down[c]:
            indeg[y] += 1
    order, ready = [], [c for c in members if not indeg[c]]
    while ready:
        c = ready.pop()
        order.append(c)
        for y in down[c]:
            indeg[y] -= 1
            if not indeg[y]:
                ready.append(y)
    best, nxt = {}, {}
    for x in reversed(order):
        inner = len({room[f] for f in members[x]}) - 1
        b, via = inner, None
        for f in members[x]:
            for g in succ[f]:
                y = comp[g]
                if y == x:
                    continue
                v = inner + (room[f] != room[g]) + best[y]
                if v > b:
                    b, via = v, (f, g)
        best[x], nxt[x] = b, via
    top = max(starts, key=lambda s: best[comp[s]])
    chain, x = [room[top]], comp[top]
    while nxt[x]:
        f, g = nxt[x]
        if room[g] != chain[-1]:
            chain.append(room[g])
        x = comp[g]
    return {
        "entry": entry, "start": top, "functions": len(reached), "calls": len(edges), "indirect": n_indirect,
        "rooms": sorted({room[f] for f in reached}, key=lambda r: (FLOOR[r], r)), "moves": moves, "up": up,
        "walk": 1 + best[comp[top]], "chain": chain,
    }


def scc(nodes, succ):
    """Tarjan's strongly connected components, iterative: node -> component id."""
    index, low, on, stack, comp = {}, {}, set(), [], {}
    counter = [0]
    for v in nodes:
        if v in index:
            continue
        work = [(v, 0)]
        while work:
            u, i = work.pop()
            if i == 0:
                index[u] = low[u] = counter[0]
                counter[0] += 1
                stack.append(u)
                on.add(u)
            ws = succ.get(u, [])
            if i < len(ws):
                work.append((u, i + 1))
                w = ws[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[u] = min(low[u], index[w])
                continue
            if low[u] == index[u]:
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp[w] = u
                    if w == u:
                        break
            if work:
                p = work[-1][0]
                low[p] = min(low[p], low[u])
    return comp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("build", help="a CMake build folder of this tree (with compile_commands.json)")
    ap.add_argument("--entry", action="append", help="a function to start from (repeatable)")
    ap.add_argument("--check", action="store_true", help="exit 1 on an upward call or a walk over --max-rooms")
    ap.add_argument("--max-rooms", type=int, default=6)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--library", action="store_true",
                    help="also list the upward calls of the whole library, reachable from the entries or not")
    ap.add_argument("--source", help="the source tree BUILD was configured from (default: this script's)")
    args = ap.parse_args()
    root = os.path.realpath(args.source or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    todo = units(os.path.realpath(args.build), root)
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="callwalk.") as tmp:
        cis = compile_units(todo, tmp, args.jobs)
        defs, calls, indirect = load(cis, root)
    print(f"callwalk: {len(todo)} units of src/ and tools/ compiled with gcc -O0 -fcallgraph-info "
          f"in {time.time() - t0:.1f} s; {len(defs)} functions defined")
    print("floors, ground first: " + " < ".join("/".join(r) for r in FLOORS))
    bad = 0
    for entry in args.entry or DEFAULT_ENTRIES:
        w = walk(entry, defs, calls, indirect, root)
        if not w:
            print(f"\nentry {entry}: not defined in src/ or tools/")
            bad = 1
            continue
        file, line = defs[w["start"]]
        print(f"\nentry {entry} ({rel(file, root)}:{line})")
        print(f"  reaches {w['functions']} functions by {w['calls']} direct calls; {w['indirect']} calls "
              "through function pointers (policy ops, writers) are not seen and not followed")
        print(f"  rooms reached: {len(w['rooms'])}: {' '.join(w['rooms'])}")
        print(f"  moves between rooms: {len(w['moves'])}")
        for (a, b), n in sorted(w["moves"].items(), key=lambda m: (-FLOOR[m[0][0]], m[0][0], -FLOOR[m[0][1]], m[0][1])):
            print(f"    {a:>13} -> {b:<13} {n:4d} call{'s' if n != 1 else ''}{'   UP' if FLOOR[a] < FLOOR[b] else ''}")
        print(f"  walk: {w['walk']} rooms on the longest chain of calls: {' > '.join(w['chain'])}")
        print(f"  upward calls: {len(w['up'])}")
        for f, g, site in sorted(w["up"], key=lambda e: e[2]):
            print(f"    {rel(site, root)}: {short(f)} ({room_of(defs[f][0], root)}) -> {short(g)} "
                  f"({room_of(defs[g][0], root)}, {rel(defs[g][0], root)}:{defs[g][1]})")
        if w["up"] or w["walk"] > args.max_rooms:
            bad = 1
    if args.library:
        up = []
        for f, cs in calls.items():
            a = room_of(defs[f][0], root) if f in defs else None
            for g, site in cs:
                b = room_of(defs[g][0], root) if g in defs else None
                if a and b and FLOOR[a] < FLOOR[b]:
                    up.append((site, f, g, a, b))
        print(f"\nthe whole library: {len(up)} upward calls (reached from the entries or not)")
        for site, f, g, a, b in sorted(up):
            print(f"    {rel(site, root)}: {short(f)} ({a}) -> {short(g)} ({b})")
    if args.check and bad:
        print(f"\ncallwalk: FAIL: an upward call, or a walk over {args.max_rooms} rooms")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
