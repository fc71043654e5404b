#!/bin/bash
# test_rooms.sh - a module's *_internal.h is included only inside its own folder (issue 40,
# "rooms keep to themselves"); a neighbour reads a declared interface instead (plan/plan_fit.h,
# trace/trace_view.h, trace/import/memprof_view.h, device/device_alloc.h). The includes that
# still cross a wall are listed below, each with why; a new one, or a listed one gone, fails.
. "$(dirname "$0")/lib.sh" "$@"
allowed="src/trace/recorder.c -> src/alloc/alloc_internal.h
src/trace/allocator_open.c -> src/alloc/alloc_internal.h
src/trace/replay/replay.c -> src/alloc/alloc_internal.h
src/trace/trace.c -> src/timeline/timeline_internal.h
src/trace/export/minimalloc.c -> src/pack/pack_internal.h
src/trace/import/xprof_memory.c -> src/hlo/hlo_internal.h
src/trace/import/memprof_internal.h -> src/hlo/hlo_internal.h"
# why: the recorder wraps a policy's ops, allocator_open opens the policy under it, and the
# replay drives a policy through the handle's ops without its lock (alloc); trace.c orders a
# timeline's buffers as events (hbmi_timeline_events); the minimalloc export is pack's CSV
# writer (hbmi_minimalloc_write); the memory profile reads its HLO modules with hlo's reader.
cd "$SRC" || fail "no source tree at $SRC"
found=$(grep -rn --include='*.[ch]' '#include "[^"]*_internal\.h"' src tools | while IFS=: read -r f _ rest; do
  inc=$(sed -E 's/.*#include "([^"]*)".*/\1/' <<<"$rest")
  d=$(dirname "$f")
  if [ -f "$d/$inc" ]; then h="$d/$inc"; elif [ -f "src/$inc" ]; then h="src/$inc"; else h="?/$inc"; fi
  h=$(realpath -m --relative-to=. "$h")
  case "$d/" in "$(dirname "$h")"/*) ;; *) echo "$f -> $h" ;; esac
done | sort)
new=$(comm -23 <(echo "$found") <(sort <<<"$allowed"))
gone=$(comm -13 <(echo "$found") <(sort <<<"$allowed"))
[ -z "$new" ] || fail "an internal header included from outside its folder (declare what the neighbour needs in a small header):
$new"
[ -z "$gone" ] || fail "listed as crossing a wall but no longer does (drop it from the list):
$gone"
echo "ok: $(grep -c . <<<"$found") internal includes cross a folder's wall, each listed with why"
