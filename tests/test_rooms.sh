#!/bin/bash
# test_rooms.sh - a module's *_internal.h is read only inside its own folder (issue 40, "rooms
# keep to themselves"), directly or through another header: a neighbour includes a declared
# interface instead (plan/plan_fit.h, plan/plan_view.h, hlo/hlo_module.h, hlo/dataflow.h,
# alloc/alloc_policy.h, timeline/timeline_events.h, report/view_model.h, fit/fit_text.h, ...).
# For every .c and .h under src/ and tools/, the quoted includes are followed to the end
# (each resolved as the compiler does: beside the file, else under src/); an *_internal.h
# reached from a file outside that header's folder is a crossing, printed with the header
# that brought it in. HBM_ROOMS_LIST=1 prints them without failing (to count a tree's).
. "$(dirname "$0")/lib.sh" "$@"
cd "$SRC" || fail "no source tree at $SRC"

declare -A deps
files=$(find src tools -name '*.[ch]' | sort)
for f in $files; do
  d=$(dirname "$f") l=""
  for inc in $(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$f"); do
    if [ -f "$d/$inc" ]; then l="$l $(realpath -m --relative-to=. "$d/$inc")"
    elif [ -f "src/$inc" ]; then l="$l src/$inc"; fi
  done
  deps[$f]=$l
done

crossings() {
  local f d x h queue
  for f in $files; do
    d=$(dirname "$f")
    declare -A via=()
    queue=("$f")
    while [ ${#queue[@]} -gt 0 ]; do
      x=${queue[0]} queue=("${queue[@]:1}")
      for h in ${deps[$x]}; do
        [ -n "${via[$h]}" ] && continue
        via[$h]=$x queue+=("$h")
      done
    done
    for h in "${!via[@]}"; do
      case $h in *_internal.h) ;; *) continue ;; esac
      case "$d/" in "$(dirname "$h")"/*) continue ;; esac
      if [ "${via[$h]}" = "$f" ]; then echo "$f -> $h (direct)"; else echo "$f -> $h (through ${via[$h]})"; fi
    done
    unset via
  done | sort
}
found=$(crossings)
n=$(grep -c . <<<"$found")
if [ -n "${HBM_ROOMS_LIST:-}" ]; then
  [ -n "$found" ] && echo "$found"
  echo "$n internal includes cross a folder's wall ($(grep -c '(direct)' <<<"$found") direct)"
  exit 0
fi
[ -z "$found" ] || fail "an internal header read from outside its folder (declare what the neighbour needs in a small header of the owner's folder):
$found"

# the walk itself finds both kinds: a direct include and one through another header
tmp=$T/tree
mkdir -p "$tmp/src/a" "$tmp/src/b" "$tmp/tools"
printf '#include "a/a_internal.h"\n' > "$tmp/src/a/a_view.h"
printf '\n' > "$tmp/src/a/a_internal.h"
printf '#include "a/a_view.h"\n' > "$tmp/src/b/b.c"
printf '#include "a/a_internal.h"\n' > "$tmp/src/b/c.c"
printf '#include "a_internal.h"\n' > "$tmp/src/a/a.c"
self=$(HBM_ROOMS_LIST=1 HBM_SOURCE_DIR="$tmp" bash "$0" "$@" | sed '$d')
want="src/b/b.c -> src/a/a_internal.h (through src/a/a_view.h)
src/b/c.c -> src/a/a_internal.h (direct)"
[ "$self" = "$want" ] || fail "the walk over a tree with two crossings found:
$self"
echo "ok: no internal header read from outside its folder ($(wc -w <<<"$files") files walked)"
