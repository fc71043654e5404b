#!/usr/bin/env bash
# test_pack_cli.sh - hbm pack from the command line: help, usage errors, CSV errors with
# file:line, feasible and infeasible capacities, --minimize, --json, --output round trip.
set -u
. "$(dirname "$0")/lib.sh" "$@"

"$HBM" pack --help | grep -q "Usage: hbm pack" || fail "help"
"$HBM" pack --help | grep -q "Time-dependent" || fail "help names --timeout time-dependent"
"$HBM" --help | grep -q "pack" || fail "pack not listed"
"$HBM" pack >/dev/null 2>&1; [ $? -eq 2 ] || fail "missing file should exit 2"
"$HBM" pack x.csv --bogus >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown option should exit 2"
"$HBM" pack x.csv --capacity lots >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad capacity should exit 2"
"$HBM" pack x.csv --capacity 10 --minimize >/dev/null 2>&1; [ $? -eq 2 ] || fail "capacity+minimize should exit 2"
"$HBM" pack x.csv --algorithm magic 2>&1 | grep -q "unknown packing algorithm" || fail "bad algorithm"

printf 'id,lower,upper,size\n0,0,10,4\n1,5,3,4\n' > "$T/bad.csv"
out=$("$HBM" pack "$T/bad.csv" 2>&1); rc=$?
[ $rc -eq 2 ] || fail "parse error should exit 2 (got $rc)"
echo "$out" | grep -q "bad.csv:3: empty lifetime" || fail "parse error names file:line: $out"

# three buffers of 3 alive together around time 2, a fourth later
printf 'id,begin,end,size\na,0,3,3\nb,1,4,3\nc,2,5,3\nd,6,8,9\n' > "$T/p.csv"
"$HBM" pack "$T/p.csv" --capacity 9 --output "$T/out.csv" >"$T/log" || fail "capacity 9 should fit: $(cat "$T/log")"
grep -q "fits 9" "$T/log" || fail "fits line"
head -1 "$T/out.csv" | grep -q "^id,lower,upper,size,offset$" || fail "output header: $(head -1 "$T/out.csv")"
[ "$(wc -l < "$T/out.csv")" -eq 5 ] || fail "output rows"
# the output is itself valid input, and packs to the same extent
"$HBM" pack "$T/out.csv" --capacity 9 >/dev/null || fail "output re-read"
"$HBM" pack "$T/p.csv" --capacity 8 >"$T/log" 2>&1; rc=$?
[ $rc -eq 1 ] || fail "capacity 8 should fail with 1 (got $rc)"
grep -q "proven infeasible" "$T/log" || fail "infeasible message: $(cat "$T/log")"
"$HBM" pack "$T/p.csv" --minimize --json >"$T/j" || fail "minimize"
grep -q '"extent": 9' "$T/j" || fail "json extent: $(cat "$T/j")"
grep -q '"proven": true' "$T/j" || fail "json proven"
"$HBM" pack "$T/p.csv" --algorithm greedy --json | grep -q '"algorithm": "greedy"' || fail "greedy json"
"$HBM" pack "$T/p.csv" --algorithm xla >/dev/null 2>&1 || fail "xla: XLA's heap simulator should pack"
# relaxations: a window (a leaves, b and c are cut to it) and the times holding 9 bytes
"$HBM" pack "$T/p.csv" --window 3:8 --minimize >"$T/log" || fail "window: $(cat "$T/log")"
grep -q "relaxation: 3 of 4 buffers, lower bound 9 " "$T/log" || fail "window line: $(cat "$T/log")"
grep -q "bounds proven here hold for the file" "$T/log" || fail "window says what it is"
"$HBM" pack "$T/p.csv" --above 9 --minimize --json >"$T/j" || fail "above"
grep -q '"relaxation": {"above": 9, "of_buffers": 4}, "buffers": 4' "$T/j" || fail "above json: $(cat "$T/j")"
"$HBM" pack "$T/p.csv" --above 10 --minimize --json | grep -q '"buffers": 0' || fail "above 10 keeps nothing"
for bad in "--window 5:3" "--window 5" "--window :3" "--window 1:2x" "--above 0" "--window 1:2 --above 3"; do
  # shellcheck disable=SC2086
  "$HBM" pack "$T/p.csv" $bad >"$T/log" 2>&1; rc=$?
  [ $rc -eq 2 ] || fail "'$bad' should exit 2 (got $rc): $(cat "$T/log")"
done
"$HBM" pack "$T/p.csv" --output - | grep -q "^a,0,3,3," || fail "output to stdout"
# sizes: SI decimal, IEC binary, and the capacity understood is echoed
printf 'id,lower,upper,size\na,0,3,1000\nb,1,4,24\n' > "$T/si.csv"
out=$("$HBM" pack "$T/si.csv" --capacity 1KB) && fail "1KB is 1000 bytes: 1024 do not fit: $out"
grep -q "capacity 1KB = 1000 bytes" <<<"$out" || fail "capacity echo: $out"
out=$("$HBM" pack "$T/si.csv" --capacity 1KiB) || fail "1KiB is 1024 bytes, it fits: $out"
grep -q "capacity 1KiB = 1024 bytes (1.0KiB)" <<<"$out" || fail "capacity echo KiB: $out"
"$HBM" pack "$T/si.csv" --capacity 1024 | grep -q "^capacity" && fail "a plain byte count needs no echo"

if [ -n "$DATA" ] && [ -f "$DATA/minimalloc/C.1048576.csv" ]; then
  "$HBM" pack "$DATA/minimalloc/C.1048576.csv" --capacity 1048576 --timeout 60 --output "$T/c.csv" >"$T/log" \
    || fail "C within 1048576: $(cat "$T/log")"
  grep -q "offset" "$T/c.csv" || fail "C output"
  # the default is reproducible: the same answer on every run (a budget of counted work,
  # not of time), whatever else the machine is doing
  for c in A D E; do
    f="$DATA/minimalloc/$c.1048576.csv"
    [ -f "$f" ] || continue
    first=$("$HBM" pack "$f" --json | sed 's/"seconds": [0-9.]*//')
    for i in 1 2 3 4 5; do
      again=$("$HBM" pack "$f" --json | sed 's/"seconds": [0-9.]*//')
      [ "$again" = "$first" ] || fail "$c: the default pack differs between runs: $first / $again"
    done
  done
else
  echo "note: MiniMalloc data not found under '$DATA', skipping the shared-data check"
fi
echo "ok"
