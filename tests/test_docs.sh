#!/usr/bin/env bash
# test_docs.sh HBM [SHARED_DATA] - the README's and docs' examples run today: every ```
# block that starts with `$ hbm ...` is run (in a scratch folder holding examples/, the
# MiniMalloc cases and XProf profiles of SHARED_DATA and a step.pickle made by tests/demo_trace.py), and every
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
if [ -n "$DATA" ] && [ -d "$DATA/xprof" ]; then
  for f in "$DATA"/xprof/*.pb; do ln -s "$f" "$T/work/$(basename "$f")"; done
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
    inputs = [w for k, w in enumerate(words[1:], 1) if re.search(r"\.(csv|hlo|pickle|hbmt|json|txt|pb|gz)$", w)
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

# ---- the Python examples: every ```python block with >>> lines runs as a doctest (```pycon
# blocks, sessions with JAX whose compile times vary, are shown, not run), with the
# repository's package over this build's libhbm.so, in the scratch folder (examples/ there)
import doctest
lib = os.path.join(os.path.dirname(os.path.realpath(subprocess.run(["sh", "-c", "command -v hbm"],
                   stdout=subprocess.PIPE).stdout.decode().strip())), "libhbm.so")
os.environ["HBM_LIBRARY"] = lib
sys.path.insert(0, os.path.join(src, "python"))
os.chdir(work)
hbm = None
if os.environ.get("HBM_SANITIZE"):  # a sanitizer's runtime must come first: python3 would abort
    print(f"skip the Python examples: libhbm.so is built with {os.environ['HBM_SANITIZE']} (test_python runs them)")
else:
    try:
        import hbm
    except Exception as e:
        print(f"skip the Python examples: {e}")
doctests = 0
for path in files if hbm and os.path.exists(lib) else []:
    text = open(path, encoding="utf-8").read()
    for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
        if ">>>" not in m.group(1):
            continue
        line = text[:m.start()].count("\n") + 2
        test = doctest.DocTestParser().get_doctest(m.group(1), {"hbm": hbm}, path, path, line)
        r = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        r.run(test, out=lambda s: print("    " + s.replace("\n", "\n    ")))
        doctests += 1
        if r.failures:
            fails += 1
            print(f"FAIL {os.path.relpath(path, src)}:{line}: the Python example's output differs")
        else:
            print(f"ok   {os.path.relpath(path, src)}:{line}: Python example ({r.tries} statements)")
# a snapshot of two devices (cuda:1 has the larger peak), for the claims below and the help texts
two = os.path.join(work, "two.json")
ev = '{"action": "alloc", "addr": %d, "size": %d, "stream": 0}'
open(two, "w").write('{"segments": [], "device_traces": [[%s], [%s, %s]]}' % (
    ev % (4096, 512), ev % (4096, 1024), ev % (8192, 2048)))
# what docs/python.md says of the attributes holds
if hbm and os.path.exists(lib):
    p = hbm.plan(os.path.join(src, "examples", "svd_fixed.hlo"))
    claims = [("Plan.estimate is False for a module XLA scheduled", p.estimate is False),
              ("the four host_*_size_in_bytes are 0 without S(5) buffers",
               [p.host_argument_size_in_bytes, p.host_output_size_in_bytes, p.host_alias_size_in_bytes,
                p.host_temp_size_in_bytes] == [0, 0, 0, 0]),
              ("generated_code_size_in_bytes is None",
               p.generated_code_size_in_bytes is None and p.host_generated_code_size_in_bytes is None)]
    t = hbm.load(two)
    claims.append(("Trace.devices lists every device of the file", [d["device"] for d in t.devices] == ["cuda:1", "cuda:0"]))
    for what, ok in claims:
        print(("ok   docs/python.md: " if ok else "FAIL docs/python.md: ") + what)
        fails += not ok
print(f"{doctests} Python examples run")

# ---- the help texts: what they say of the output holds
def run(*args, env=None):
    return subprocess.run(["hbm"] + list(args), cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env).stdout.decode("utf-8", "replace")
helps = []
view_help = run("view", "--help")
page = os.path.join(work, "two.html")
run("view", "two.json", "--html", page)
html = open(page, encoding="utf-8").read() if os.path.exists(page) else ""
helps.append(("hbm view --help: the HTML page holds every device, with a selector",
              "selector switches" in view_help and "cuda:0" in html and "cuda:1" in html))
c_env = dict(os.environ, LC_ALL="C")
text_c = run("view", "two.json", env=c_env)
helps.append(("hbm view --help: ASCII sparklines under LC_ALL=C",
              "LC_ALL=C" in view_help and all(ord(ch) < 128 for ch in text_c)))
export_help = run("export", "--help")
perf = os.path.join(work, "two.perfetto.json")
run("export", "two.json", "--format", "perfetto", "-o", perf)
pids = set()
if os.path.exists(perf):
    pids = {e["pid"] for e in json.load(open(perf))["traceEvents"]}
helps.append(("hbm export --help: perfetto has a process per device", "a process per device" in export_help and len(pids) == 2))
# the examples record with `hbm run --trace F`: F is hbm's binary trace (.hbmt), as hbm run writes
for f in sorted(os.listdir(os.path.join(src, "examples"))):
    for m in re.finditer(r"hbm run --trace (\S+)", open(os.path.join(src, "examples", f), encoding="utf-8").read()):
        helps.append((f"examples/{f}: hbm run --trace {m.group(1)} names an hbm trace", m.group(1).endswith(".hbmt")))
for what, ok in helps:
    print(("ok   " if ok else "FAIL ") + what)
    fails += not ok
print(f"{ran} examples run, {skipped} skipped, {fails} failed")
if ran == 0:
    print("FAIL: no example found in the docs")
    sys.exit(1)
sys.exit(1 if fails else 0)
EOF
