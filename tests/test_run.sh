#!/usr/bin/env bash
# test_run.sh HBM SHARED_DATA - hbm run over a program that calls the fake CUDA driver
# through dlsym and cuGetProcAddress, as runtimes do.
set -u
. "$(dirname "$0")/lib.sh" "$@"
hbm="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"  # absolute: some cases run elsewhere
fails=0
[ -n "${HBM_FAKE_CUDA:-}" ] && [ -f "$HBM_FAKE_CUDA" ] && [ -x "${HBM_FAKE_APP:-}" ] ||
  { echo "SKIP: the fake CUDA driver or fake_app is not built (HBM_FAKE_CUDA, HBM_FAKE_APP)"; exit 77; }
export HBM_CUDA_DRIVER="$HBM_FAKE_CUDA"
pre="$(dirname "$hbm")/libhbm_preload.so"
if ldd "$pre" 2>/dev/null | grep -qE 'lib(asan|tsan|ubsan)'; then
  # A sanitizer runtime must be first in the link order; an LD_PRELOAD library that
  # interposes dlsym comes before it and the sanitizer crashes at start-up.
  echo "SKIP: libhbm_preload.so is built with sanitizers; hbm run is tested in the plain build"; exit 77
fi
tmp=$T
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; [ -n "${2:-}" ] && echo "$2"; fails=$((fails+1)); }

# 1. a limit that refuses the big allocation, with a trace
out=$("$hbm" run --trace "$tmp/t.hbmt" --limit 16MiB -- "$HBM_FAKE_APP" 67108864 2>&1); rc=$?
[ "$rc" = 0 ] && ok "limit: exit 0" || bad "limit: exit $rc" "$out"
grep -q "fake_app: big alloc rc=2" <<<"$out" && ok "limit: refused with CUDA_ERROR_OUT_OF_MEMORY" || bad "limit: rc" "$out"
grep -q "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 67108864 bytes." <<<"$out" && ok "limit: OOM report" || bad "limit: report" "$out"
grep -q "op=cuMemAllocFromPoolAsync" <<<"$out" && ok "limit: report lists live buffers by API" || bad "limit: live" "$out"
grep -q "hbm run: 5 allocations, 5 frees, peak 6.00MiB in use (6291456 bytes).*trace $tmp/t.hbmt (15 events)" <<<"$out" &&
  ok "limit: summary" || bad "limit: summary" "$out"

grep -q "hbm run: refused cuMemAlloc_v2(64.00MiB, 67108864 bytes): 6.00MiB in use + 64.00MiB is past --limit 16.00MiB" <<<"$out" &&
  grep -q "raising" <<<"$out" && grep -q "to at least 70.00MiB would let it through" <<<"$out" &&
  ok "limit: the refusal names --limit and what would let it through" || bad "limit: refusal line" "$out"

# a program that allocates nothing: a summary line all the same, an existing trace kept
echo old > "$tmp/keep.hbmt"
out=$("$hbm" run --trace "$tmp/keep.hbmt" -- true 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "hbm run: no CUDA allocations seen: is the program using the GPU?" <<<"$out" &&
  grep -q "is left as it was" <<<"$out" && [ "$(cat "$tmp/keep.hbmt")" = old ] &&
  ok "no CUDA: says so, the old trace is kept" || bad "no CUDA" "$out"
[ -z "$(ls "$tmp" | grep 'keep.hbmt.tmp')" ] && ok "no CUDA: no temporary left" || bad "no CUDA: temporary left" "$(ls "$tmp")"
out=$("$hbm" run --quiet -- true 2>&1)
[ -z "$out" ] && ok "no CUDA, --quiet: silent" || bad "no CUDA --quiet" "$out"
# a program whose child allocates with every inherited descriptor closed (Python's
# subprocess does that): hbm run still knows CUDA was used
if command -v python3 >/dev/null; then
  out=$("$hbm" run -- python3 -c 'import subprocess, sys; subprocess.run([sys.argv[1], "1024"], close_fds=True)' "$HBM_FAKE_APP" 2>&1)
  grep -q "hbm run: [0-9]* allocations" <<<"$out" && ! grep -q "no CUDA allocations seen" <<<"$out" &&
    ok "no CUDA line only when none was seen (child with closed descriptors)" || bad "closed descriptors" "$out"
fi
mkdir "$tmp/adir"
out=$("$hbm" run --trace "$tmp/adir" -- true 2>&1); rc=$?
[ "$rc" = 2 ] && grep -q "adir is a directory" <<<"$out" && ok "--trace DIR: says so, exit 2" || bad "--trace dir ($rc)" "$out"
# a new trace replaces the old one once the program has ended
echo old > "$tmp/t2.hbmt"
"$hbm" run --trace "$tmp/t2.hbmt" -- "$HBM_FAKE_APP" 1024 >/dev/null 2>&1
"$hbm" view "$tmp/t2.hbmt" --json >/dev/null 2>&1 && ok "trace: replaced when the program ends" || bad "trace: not replaced"

# the trace is hbm's format: hbm view / replay / export read it
"$hbm" view "$tmp/t.hbmt" --json > "$tmp/view.json" 2>&1 && ok "trace: hbm view reads it" || bad "trace: view" "$(cat "$tmp/view.json")"
grep -q '"source": "hbm run", "device": "[^"]*", "events": 15, "peak_bytes_in_use": 6291456' "$tmp/view.json" &&
  grep -q '"allocs": 5, "frees": 5, "ooms": 1, "first_oom_event": 3' "$tmp/view.json" &&
  grep -q '"label": "cuMemAllocFromPoolAsync"' "$tmp/view.json" && ok "trace: view figures and API labels" ||
  bad "trace: view figures" "$(cat "$tmp/view.json")"
out=$("$hbm" replay "$tmp/t.hbmt" --allocators platform,cuda_async --device sim:16MiB 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "allocator=platform  *6.00MiB" <<<"$out" && grep -q "allocator=cuda_async" <<<"$out" &&
  grep -q "event 3 (.*s): 64.00MiB" <<<"$out" && ok "trace: hbm replay reads it (the refused 64 MiB fails again: exit 1)" ||
  bad "trace: replay" "$out"
"$hbm" export "$tmp/t.hbmt" --format perfetto -o "$tmp/p.json" >/dev/null 2>&1 && grep -q '"in use"' "$tmp/p.json" &&
  ok "trace: hbm export reads it" || bad "trace: export" "$(head -c 300 "$tmp/p.json")"
# event by event: kind, stream, API label, thread, ordered times
if command -v python3 >/dev/null; then
  cat > "$tmp/dec.py" <<'PY'
import struct, sys
def decode(path):
    """(kind, stream, api, thread, time, addr, size) per event of an hbm trace."""
    d = open(path, "rb").read()
    assert d[:8] == b"HBMTRACE" and struct.unpack_from("<I", d, 8)[0] in (2, 3)
    off, tags, evs, t, a = struct.unpack_from("<I", d, 12)[0], {}, [], 0, 0
    kinds = {1: "alloc", 2: "free", 3: "oom", 7: "sync"}
    while off < len(d):
        ty = d[off]
        if ty >= 0x10:
            n = struct.unpack_from("<I", d, off + 4)[0]
            if ty == 0x10:
                p, o, s = d[off + 8:off + 8 + n], 12, []
                for _ in range(4):
                    l = struct.unpack_from("<I", p, o)[0]; o += 4
                    if l != 0xffffffff: s.append(p[o:o + l].decode()); o += l
                    else: s.append(None)
                tags[struct.unpack_from("<I", p, 0)[0]] = s[3]
            off += 8 + n
            continue
        off += 1; v = []
        for _ in range(8):
            x = sh = 0
            while True:
                c = d[off]; off += 1; x |= (c & 0x7f) << sh; sh += 7
                if not c & 0x80: break
            v.append(x)
        t += v[0]
        a = (a + ((v[1] >> 1) ^ -(v[1] & 1))) % 2**64
        evs.append((kinds[ty], hex(v[4]), tags.get(v[6]), v[5], t, a, v[2]))
    return evs
PY
  out=$(python3 - "$tmp/t.hbmt" "$tmp" <<'PY' 2>&1
import sys; sys.path.insert(0, sys.argv[2]); from dec import decode
evs = decode(sys.argv[1])
got = [(k, s, api) for k, s, api, *_ in evs]
want = [("alloc", "0x0", "cuMemAlloc_v2"), ("alloc", "0x0", "cuMemAlloc_v2"), ("alloc", "0x51", "cuMemAllocFromPoolAsync"),
        ("oom", "0x0", "cuMemAlloc_v2"), ("free", "0x51", "cuMemFreeAsync"), ("sync", "0x51", "cuStreamSynchronize"),
        ("free", "0x0", "cuMemFree_v2"), ("free", "0x0", "cuMemFree_v2"), ("sync", hex(2**64 - 1), "cuCtxSynchronize"),
        # CUDA 13's cuCtxSynchronize(ctx), given and NULL: recorded, and the call reaches the driver whole
        ("sync", hex(2**64 - 1), "cuCtxSynchronize"), ("sync", hex(2**64 - 1), "cuCtxSynchronize"),
        # physical memory: freed at the unmap when released while mapped, else at the release
        ("alloc", "0x0", "cuMemCreate"), ("free", "0x0", "cuMemUnmap"),
        ("alloc", "0x0", "cuMemCreate"), ("free", "0x0", "cuMemRelease")]
assert got == want, got
assert all(e[3] == 1 for e in evs), evs
assert [e[4] for e in evs] == sorted(e[4] for e in evs), evs
assert [e[6] for e in evs][:3] == [1 << 20, 2 << 20, 3 << 20], evs
print("events ok")
PY
)
  grep -q "events ok" <<<"$out" && ok "trace: events with streams, syncs, API labels, thread, time order" || bad "trace: events" "$out"
fi

# threads: 4 threads allocate and free 1000 times each on their own streams; the driver
# reuses addresses at once, so a free recorded after another thread's alloc of the same
# address would break the pairing (and leave "live" bytes at exit)
out=$("$hbm" run --trace "$tmp/th.hbmt" -- "$HBM_FAKE_APP" 1024 threads 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "hbm run: 4006 allocations, 4006 frees, .* 0B live at exit; trace .* (8016 events)" <<<"$out" &&
  ok "threads: every alloc and free recorded" || bad "threads: summary" "$out"
out=$("$hbm" replay "$tmp/th.hbmt" --allocators platform,cuda_async --device sim:1GiB --json 2>&1)
grep -q '"allocator": "cuda_async", "status": "HBM_OK", "allocs": 4006, "frees": 4006, "ooms": 0' <<<"$out" &&
  ok "threads: replay on cuda_async pairs every free" || bad "threads: replay" "$out"
if command -v python3 >/dev/null; then
  out=$(python3 - "$tmp/th.hbmt" "$tmp" <<'PY' 2>&1
import sys; sys.path.insert(0, sys.argv[2]); from dec import decode
evs = decode(sys.argv[1])
workers = [e for e in evs if e[3] != 1]
assert sorted({e[3] for e in workers}) == [2, 3, 4, 5], {e[3] for e in workers}
for th in (2, 3, 4, 5):
    mine = [e for e in workers if e[3] == th]
    assert len(mine) == 2000 and len({e[1] for e in mine}) == 1 and int(mine[0][1], 16) in range(0x100, 0x104), mine[:3]
    assert [e[0] for e in mine] == ["alloc", "free"] * 1000, th
live = set()
for k, s, api, th, t, a, n in evs:
    if k == "alloc": assert a not in live, hex(a); live.add(a)
    elif k == "free": live.remove(a)
assert not live and [e[4] for e in evs] == sorted(e[4] for e in evs)
print("threads ok")
PY
)
  grep -q "threads ok" <<<"$out" && ok "threads: thread numbers, streams, no address live twice" || bad "threads: events" "$out"
else
  echo "skip trace event decoding: no python3"
fi

# a second process of the run that allocates writes FILE.<pid>; both read
out=$("$hbm" run --quiet --trace "$tmp/two.hbmt" -- sh -c '"$0" 1024 && "$0" 2048' "$HBM_FAKE_APP" 2>&1); rc=$?
second=$(ls "$tmp"/two.hbmt.* 2>/dev/null | head -1)
[ "$rc" = 0 ] && [ -n "$second" ] && "$hbm" view "$tmp/two.hbmt" >/dev/null 2>&1 && "$hbm" view "$second" >/dev/null 2>&1 &&
  ok "two processes: FILE and FILE.<pid>" || bad "two processes" "$out $(ls "$tmp")"
out=$(cd "$tmp" && "$hbm" run --quiet --trace rel.hbmt -- sh -c 'cd / && "$0" 1024' "$HBM_FAKE_APP" 2>&1)
"$hbm" view "$tmp/rel.hbmt" >/dev/null 2>&1 && ok "trace: a relative path is the caller's, not the program's" || bad "trace: relative" "$out"
out=$("$hbm" run --trace /nonexistent-dir/t.hbmt -- true 2>&1); [ $? = 2 ] && grep -q "cannot create it" <<<"$out" &&
  ok "trace: an uncreatable file fails before the run" || bad "trace: bad path" "$out"

# the device: the one the program allocated on, as the driver reports it (name, index,
# total), is in the trace; replay and view assume it and say so; --device still wins
FAKE_CUDA_DEVICES=2 FAKE_APP_DEVICE=1 FAKE_CUDA_MEM=3G "$hbm" run --quiet --trace "$tmp/dev.hbmt" -- "$HBM_FAKE_APP" 1024 >/dev/null 2>&1
out=$("$hbm" view "$tmp/dev.hbmt" 2>&1)
grep -qx "device       hbm fake GPU 1 (cuda:1), 3.00GiB (from the trace header)" <<<"$out" &&
  ok "device: view names the traced device (cuda:1, 3 GiB)" || bad "device: view" "$out"
out=$("$hbm" view "$tmp/dev.hbmt" --json 2>&1)
grep -q '"device": "hbm fake GPU 1"' <<<"$out" && grep -q '"device_bytes": 3221225472, "device_assumed": "from the trace header"' <<<"$out" &&
  grep -q '"device_index": 1,' <<<"$out" && ok "device: view --json" || bad "device: view --json" "$out"
out=$("$hbm" replay "$tmp/dev.hbmt" 2>&1)
grep -q "^  on a simulated device of 3.00GiB (from the trace header; --device sets another)$" <<<"$out" &&
  ok "device: replay runs on the traced device" || bad "device: replay" "$out"
out=$("$hbm" replay "$tmp/dev.hbmt" --json 2>&1)
grep -q '"device": "sim:3221225472", "device_assumed": "from the trace header"' <<<"$out" &&
  ok "device: replay --json" || bad "device: replay --json" "$out"
out=$("$hbm" replay "$tmp/dev.hbmt" --device sim:16MiB --json 2>&1)
grep -q '"device": "sim:16MiB", "device_assumed": "given (--device)"' <<<"$out" &&
  ok "device: --device wins" || bad "device: --device" "$out"
# with --limit the header holds the limit (as before); the device's total replaces it
out=$("$hbm" replay "$tmp/t.hbmt" --allocators platform 2>&1)
grep -q "^  on a simulated device of 1.00GiB (from the trace header; --device sets another)$" <<<"$out" &&
  ok "device: a --limit run replays on the device, not the limit" || bad "device: limit" "$out"

# 2. no limit: everything goes through; quiet: no summary
out=$("$hbm" run --quiet -- "$HBM_FAKE_APP" 67108864 2>&1); rc=$?
[ "$rc" = 0 ] && grep -q "big alloc rc=0" <<<"$out" && ! grep -q "hbm run:" <<<"$out" && ok "no limit, quiet" || bad "no limit" "$out"

# 3. errors
out=$("$hbm" run 2>&1); [ $? = 2 ] && grep -q "hbm run: missing COMMAND" <<<"$out" && ok "usage: no command" || bad "usage" "$out"
out=$("$hbm" run --limit lots -- true 2>&1); [ $? = 2 ] && grep -q "hbm run: --limit 'lots': expected a size > 0" <<<"$out" && ok "usage: bad limit" || bad "bad limit" "$out"
out=$("$hbm" run -- /nonexistent/prog 2>&1); [ $? = 127 ] && grep -q "cannot run '/nonexistent/prog'" <<<"$out" && ok "exec failure: 127" || bad "exec" "$out"
out=$("$hbm" run -- sh -c 'exit 3' 2>&1); [ $? = 3 ] && ok "exit status passed through" || bad "status" "$out"
out=$("$hbm" run --help); grep -q "Usage: hbm run" <<<"$out" && ok "help" || bad "help" "$out"
[ "$fails" = 0 ] || { echo "$fails failures"; exit 1; }
