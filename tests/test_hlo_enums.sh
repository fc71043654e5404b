#!/bin/bash
# test_hlo_enums.sh - the module's and the plan's coded fields are real enums (issue 40): a
# fusion's kind (hbmi_fusion_kind), what an instruction calls a computation for
# (hbmi_called_role), how the dataflow runs a computation (hbmi_comp_kind), XLA's allocation
# kind of a logical buffer (hbmi_xla_cat), the compiler a profile names (hbmi_hlo_backend) and
# the heap simulation's events. None of them is compared with, or set to, a character code any
# more; a merge that brings one back (`kind == 'S'`, `called_role[k] == 'b'`) compiles but
# would be wrong, so this fails on it.
. "$(dirname "$0")/lib.sh" "$@"
cd "$SRC" || fail "no source tree at $SRC"
fields='(fusion_kind|backend_hint|hint|kind|cat|called_role(\[[^]]*\])?)'
pat="(->|\.)$fields *([!=]=|=) *'[^'\\\\]'|\brole *([!=]=|=) *'[^'\\\\]'|emit\(s, *'[^'\\\\]'"
found=$(grep -rnE "$pat" src/hlo src/plan src/fit || true)
[ -z "$found" ] || fail "a coded field compared with or set to a character (use its enum):
$found"
# the pattern itself catches both forms
hit=$(printf "%s\n" "if (c->kind != 'S') x;" "if (in->called_role[k] == 'b') y;" "if (role != 'b') z;" "b->cat = 'p';" "ok = p[0] == 'k';" |
  grep -cE "$pat")
[ "$hit" = 4 ] || fail "the check found $hit of the 4 coded comparisons in its own sample"
echo "ok: no coded field of src/hlo, src/plan or src/fit compared with a character"
