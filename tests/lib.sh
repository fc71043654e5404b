# tests/lib.sh - what the shell tests share. CMake runs each as `bash tests/test_X.sh HBM
# SHARED_DATA`; a test sources this first:
#   . "$(dirname "$0")/lib.sh" "$@"
# and has
#   HBM    the hbm binary ($1)            BUILD  the folder it was built in
#   DATA   the shared data folder ($2, may be empty or absent)
#   SRC    the source tree (HBM_SOURCE_DIR, else this file's parent folder)
#   T      a fresh temporary folder, removed when the test exits
#   fail MSG       "FAIL: MSG", exit 1
#   skip MSG       "SKIP: MSG", exit 77 (CTest counts the test as skipped)
#   need CMD WHY   skip unless CMD is on PATH ("SKIP: CMD is needed WHY")
#   need_data P    skip unless DATA/P exists (the shared data set is absent)
# A test may define its own fail or check after sourcing (some count failures instead).
HBM=${1:?usage: test_X.sh HBM [SHARED_DATA]}
DATA=${2:-}
BUILD=$(dirname "$HBM")
SRC=${HBM_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
need() { command -v "$1" >/dev/null || skip "$1 is needed${2:+ $2}"; }
need_data() { [ -n "$DATA" ] && [ -e "$DATA/$1" ] || skip "no shared data at ${DATA:-(none)}/$1"; }
