#!/usr/bin/env bash
# test_docs.sh HBM [SHARED_DATA] - the README's and docs' examples run today: every ```
# block that starts with `$ hbm ...` is run (in a scratch folder holding examples/, the
# MiniMalloc cases of SHARED_DATA and a step.pickle made by tests/demo_trace.py), and every
# line it quotes must be a line of today's output (stdout and stderr). Lines with "..."
# are elisions and lines with timings ("0.232 s", "5.18 ms", "0.000630s") vary: both are
# skipped. An example whose input is not here (no shared data) is skipped, said so.
set -u
. "$(dirname "$0")/lib.sh" "$@"
HBM="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
need python3 "to read the docs"
mkdir "$T/bin" "$T/work"
ln -s "$HBM" "$T/bin/hbm"
ln -s "$SRC/examples" "$T/work/examples"
if [ -n "$DATA" ] && [ -d "$DATA/minimalloc" ]; then
  for f in "$DATA"/minimalloc/*.csv; do ln -s "$f" "$T/work/$(basename "$f")"; done
fi
python3 "$SRC/tests/demo_trace.py" "$T/work/step.pickle" >/dev/null || { echo "FAIL: tests/demo_trace.py"; exit 1; }

PATH="$T/bin:$PATH" python3 - "$SRC" "$T/work" <<'EOF'
import os, re, shlex, subprocess, sys

src, work = sys.argv[1], sys.argv[2]
timing = re.compile(r"\d\.\d+ ?m?s\b")
files = [os.path.join(src, "README.md")] + sorted(
    os.path.join(src, "docs", f) for f in os.listdir(os.path.join(src, "docs")) if f.endswith(".md"))
examples = []  # (file, line, command, quoted lines)
for path in files:
    lines = open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        block, start = lines[i + 1:j], i + 2
        i = j + 1
        if not block or not block[0].startswith("$ hbm "):
            continue
        cmd, quoted = None, []
        for k, line in enumerate(block + ["$ "]):
            if line.startswith("$ "):
                if cmd:
                    examples.append((os.path.relpath(path, src), cmd_line, cmd, quoted))
                cmd, cmd_line, quoted = line[2:].strip(), start + k, []
                if not cmd.startswith("hbm "):
                    cmd = None
            elif cmd:
                quoted.append(line)

fails = ran = skipped = 0
for path, line, cmd, quoted in examples:
    words = shlex.split(cmd)
    inputs = [w for k, w in enumerate(words[1:], 1) if re.search(r"\.(csv|hlo|pickle|hbmt|json|txt)$", w)
              and words[k - 1] not in ("--output", "-o", "--html")]  # the files it reads
    missing = [w for w in inputs if not os.path.exists(os.path.join(work, w))]
    if missing:
        print(f"skip {path}:{line}: {cmd} (no {', '.join(missing)} here)")
        skipped += 1
        continue
    out = subprocess.run(cmd, shell=True, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=300).stdout.decode("utf-8", "replace")
    have = {l.rstrip() for l in out.split("\n")}
    ran += 1
    bad = [q for q in quoted if q.strip() and "..." not in q and not timing.search(q) and q.rstrip() not in have]
    if bad:
        fails += 1
        print(f"FAIL {path}:{line}: {cmd}: quoted lines not in today's output:")
        for q in bad:
            print(f"    {q}")
        print("  today's output:\n" + "\n".join("    " + l for l in out.rstrip().split("\n")[:60]))
    else:
        print(f"ok   {path}:{line}: {cmd} ({len(quoted)} lines quoted)")
# every device name the docs give is one `hbm devices` knows
import json
known = set()
for d in json.loads(subprocess.run(["hbm", "devices", "--json"], stdout=subprocess.PIPE).stdout):
    known.add(d["name"].lower())
    known.update(a.lower() for a in d["aliases"].split(","))
names = 0
for path in files:
    text = open(path, encoding="utf-8").read()
    found = re.findall(r"""--device[ =]['"]?([A-Za-z0-9._-]+)(?![:A-Za-z0-9._-])|device=["']([A-Za-z0-9._-]+)["']""", text)
    found = [a or b for a, b in found if (a or b) not in ("...", "NAME", "SIZE")]
    for m in re.finditer(r"Device names:(.*?)[.;]\s", text, re.S):  # a list of them in prose
        found += [w for w in re.findall(r"`([^`]+)`", m.group(1)) if ":" not in w and " " not in w]
    for name in found:
        names += 1
        if name.lower() not in known:
            fails += 1
            print(f"FAIL {os.path.relpath(path, src)}: device '{name}' is not one 'hbm devices' lists")
print(f"{names} device names in the docs checked against 'hbm devices'")
print(f"{ran} examples run, {skipped} skipped, {fails} failed")
if ran == 0:
    print("FAIL: no example found in the docs")
    sys.exit(1)
sys.exit(1 if fails else 0)
EOF
