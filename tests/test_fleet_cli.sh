#!/usr/bin/env bash
# test_fleet_cli.sh - hbm view of many ranks on synthetic ones (tests/fleet_gen.py): three
# pipeline stages must come out as three groups, the rank with a planted 25 % as the one
# outlier and the worst rank, and the planted source line first in its diff against the
# median rank; summaries read back give the same fleet; a rank that cannot be read is named
# and the rest shown (exit 2); nothing readable is exit 2 without a table.
set -u
. "$(dirname "$0")/lib.sh" "$@"
need python3 "to write the ranks and check the JSON"
mkdir "$T/r" && python3 "$SRC/tests/fleet_gen.py" "$T/r" || fail "generator"
mv "$T/r/expect.json" "$T/expect.json"
"$HBM" view "$T"/r/rank*.json --json --jobs 3 >"$T/f.json" || fail "fleet --json"
"$HBM" view "$T/r" --json --jobs 1 >"$T/f1.json" || fail "fleet of the folder, one thread"
cmp -s "$T/f.json" "$T/f1.json" || fail "3 threads and 1 thread differ (or a folder and its files)"
python3 - "$T/f.json" "$T/expect.json" <<'PY' || fail "planted stages and outlier"
import json, os, sys
f, e = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
base = lambda p: os.path.basename(p)
assert f["read"] == 12 and f["failed"] == 0, (f["read"], f["failed"])
assert [base(n) for n in f["outliers"]] == [e["outlier"]], f["outliers"]
assert base(f["worst"]) == e["outlier"], f["worst"]
groups = [sorted(base(n) for n in g["ranks"]) for g in f["groups"]]
for st in e["stages"]:
    assert sorted(st) in groups, (st, groups)
assert [e["outlier"]] in groups and len(groups) == 4, groups
c = f["diff"]["contributors"][0]
assert c["source"] == "planted.py:42" and c["delta_bytes"] == e["planted_bytes"] and c["a_bytes"] == 0, c
r = [x for x in f["ranks"] if base(x["name"]) == e["outlier"]][0]
assert r["sites"][0]["source"] == "planted.py:42" and r["outlier"], r["sites"][0]
PY
# the terminal table: 100 columns, the worst first, the rest summarised
"$HBM" view "$T"/r/*.json --top 3 >"$T/f.txt" || fail "fleet text"
awk 'length($0) > 100 { print "line " NR " has " length($0) " columns: " $0; bad = 1 } END { exit bad }' "$T/f.txt" || fail "wider than 100 columns"
grep -q "^W! rank05.json" "$T/f.txt" || fail "the worst rank is not first: $(cat "$T/f.txt")"
# a rank hundreds of times the median (HLO modules as ranks) still fits: its ratio, "698x"
"$HBM" view "$SRC"/examples/svd_oom.hlo "$SRC"/examples/svd_fixed.hlo "$SRC"/examples/fit_remat.hlo >"$T/h.txt" || fail "modules as ranks"
awk 'length($0) > 100 { print "line " NR ": " $0; bad = 1 } END { exit bad }' "$T/h.txt" || fail "wider than 100 columns"
grep -q "^W! svd_oom.hlo .* 698x " "$T/h.txt" || fail "ratio column: $(grep svd_oom "$T/h.txt")"
grep -q "more ranks" "$T/f.txt" || fail "the rest is not summarised"
grep -q "planted.py:42" "$T/f.txt" || fail "no planted line in the diff"
grep -q "^4 groups" "$T/f.txt" || fail "groups: $(grep groups "$T/f.txt")"
# the worst rank's diff is hbm diff's: the same contributors
python3 - "$T/f.json" "$HBM" <<'PY' || fail "diff of worst and median against hbm diff"
import json, subprocess, sys
f = json.load(open(sys.argv[1]))
d = json.loads(subprocess.run([sys.argv[2], "diff", f["diff"]["a"], f["diff"]["b"], "--json"], check=True,
                              capture_output=True, text=True).stdout)
n = len(f["diff"]["contributors"])
assert n == min(15, d["contributors_total"]) and d["contributors"][:n] == f["diff"]["contributors"], n
assert d["contributors_total"] == f["diff"]["contributors_total"]
assert d["delta_bytes_in_use"] == f["diff"]["delta_bytes_in_use"]
PY
# summaries: written next to the ranks, the fleet of them equals the fleet of the ranks
for r in "$T"/r/*.json; do "$HBM" view "$r" --summary "$r.summary.json" 2>/dev/null || fail "summary of $r"; done
head -c 40 "$T/r/rank00.json.summary.json" | grep -q '^{"hbm_summary": 1' || fail "summary without its version first"
"$HBM" view "$T"/r/*.summary.json --json >"$T/s.json" || fail "fleet of summaries"
cmp -s "$T/f.json" "$T/s.json" || fail "the fleet of summaries differs from the fleet of the ranks"
"$HBM" view "$T/r" --json >"$T/d.json" || fail "fleet of a folder with summaries"
cmp -s "$T/f.json" "$T/d.json" || fail "a folder read through its summaries differs"
# a summary of a later version is refused, naming the versions
sed 's/"hbm_summary": 1/"hbm_summary": 7/' "$T/r/rank00.json.summary.json" >"$T/v7.json"
"$HBM" view "$T/v7.json" >"$T/v7.out" 2>&1; [ $? -eq 2 ] || fail "version 7 accepted"
grep -q "version 7, this hbm reads version 1" "$T/v7.out" || fail "version message: $(cat "$T/v7.out")"
# bad input: one unreadable rank is named, the rest shown, exit 2
rm "$T"/r/*.summary.json
printf 'not a trace' >"$T/r/rank12.json"
"$HBM" view "$T"/r/*.json >"$T/b.txt" 2>"$T/b.err"; rc=$?
[ $rc -eq 2 ] || fail "one bad rank: exit $rc"
grep -q "1 input could not be read" "$T/b.txt" && grep -q "rank12.json" "$T/b.txt" || fail "bad rank not named: $(cat "$T/b.txt")"
grep -q "^W! rank05.json" "$T/b.txt" || fail "the others not shown"
grep -q "1 of 13 inputs could not be read" "$T/b.err" || fail "stderr: $(cat "$T/b.err")"
"$HBM" view "$T"/r/*.json --json >"$T/b.json" 2>/dev/null; [ $? -eq 2 ] || fail "bad rank --json exit"
python3 -c 'import json,sys; f=json.load(open(sys.argv[1])); assert f["failed"] == 1 and f["read"] == 12 and "error" in f["ranks"][-1]' "$T/b.json" || fail "bad rank in JSON"
# a summary its writer could not read (an "error" key): that rank named as failed, the rest
# read (under ASan this once read the list's count from the freed JSON)
printf '{"hbm_summary": 1, "path": "gone.pickle", "error": "gone.pickle: truncated", "ranks": []}' >"$T/gone.summary.json"
"$HBM" view "$T/r/rank00.json" "$T/gone.summary.json" >"$T/g.out" 2>"$T/g.err"; rc=$?
[ $rc -eq 2 ] && grep -q "gone.pickle: truncated" "$T/g.out" "$T/g.err" || fail "error summary: exit $rc, $(cat "$T/g.out" "$T/g.err")"
# nothing readable: exit 2, no table on stdout
printf 'x' >"$T/x1"; printf 'y' >"$T/x2"
"$HBM" view "$T/x1" "$T/x2" >"$T/n.out" 2>"$T/n.err"; rc=$?
[ $rc -eq 2 ] && [ ! -s "$T/n.out" ] && grep -q "none of the inputs could be read" "$T/n.err" || fail "nothing read: exit $rc"
# the page: self-contained, a bar per rank, each rank's own page beside it
"$HBM" view "$T"/r/rank0*.json --html "$T/fleet.html" 2>/dev/null || fail "fleet --html"
grep -q '"hbm_fleet": 1' "$T/fleet.html" || fail "no data in the page"
grep -q '<script src=\|<link ' "$T/fleet.html" && fail "the page loads something"
n=$(ls "$T/fleet.html.ranks" | wc -l); [ "$n" -eq 10 ] || fail "$n rank pages, want 10"
grep -q '"page": "rank-5-0.html"' "$T/fleet.html" || fail "no link to rank 5's page"
"$HBM" view "$T/r/rank00.json" "$T/r/rank01.json" --margin -5 2>/dev/null; [ $? -eq 2 ] || fail "negative margin accepted"
echo "ok"
