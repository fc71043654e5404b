#!/usr/bin/env bash
# test_exports.sh - libhbm.so exports its API and nothing else: every dynamic symbol it
# defines is a function declared HBM_API in include/hbm/*.h, every HBM_API function is
# exported, and every function the public headers declare carries HBM_API.
set -u
. "$(dirname "$0")/lib.sh" "$@"
src=$SRC lib=$BUILD/libhbm.so
need nm "(binutils) to read $lib"
[ -e "$lib" ] || skip "no $lib (a static-only build)"

# defined dynamic symbols, without the linker's own (_init, _fini, _edata, ...)
nm -D --defined-only "$lib" | awk '$3 !~ /^_/ {print $3}' | sort -u > "$T/exported"
[ -s "$T/exported" ] || fail "nm read no symbols from $lib"
# the names the headers mark: the identifier before the first '(' of each HBM_API
# declaration (which may run over several lines)
for h in "$src"/include/hbm/*.h; do
    awk '/^[[:space:]]*#/ {next}
         /^[[:space:]]*HBM_API / {d = ""; on = 1}
         on {d = d " " $0; if (index(d, "(")) {sub(/[[:space:]]*\(.*/, "", d); n = split(d, w, /[^A-Za-z0-9_]+/);
                                               print w[n]; on = 0}}' "$h"
done | sort -u > "$T/marked"
[ "$(wc -l < "$T/marked")" -ge 100 ] || fail "found only $(wc -l < "$T/marked") HBM_API declarations"

extra=$(comm -23 "$T/exported" "$T/marked")
[ -z "$extra" ] || fail "exported by $lib but not declared HBM_API in include/hbm/: $(echo $extra)"
missing=$(comm -13 "$T/exported" "$T/marked")
[ -z "$missing" ] || fail "declared HBM_API but not exported by $lib: $(echo $missing)"
# a function declaration at the start of a line in a public header without the mark
unmarked=$(grep -nE '^[A-Za-z_][A-Za-z0-9_ ]*[ *]hbm_[A-Za-z0-9_]+[[:space:]]*\(' "$src"/include/hbm/*.h |
           grep -vE ':(HBM_API|typedef|static|extern|#)')
[ -z "$unmarked" ] || fail "public functions declared without HBM_API: $unmarked"
echo "ok: $(wc -l < "$T/exported") symbols exported, all of them declared HBM_API"
