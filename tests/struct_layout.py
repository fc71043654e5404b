"""struct_layout.py - every C struct the Python package mirrors by hand (a ctypes.Structure
whose docstring starts "hbm_NAME (hbm/HEADER.h)") against C's own layout: a C program is
generated from the Python side's field names, compiled against include/ and run; it prints
each struct's sizeof and each field's offsetof and size, which must equal ctypes'; the
field names, in order, are read from the header's typedef. A field renamed, added, removed,
retyped or moved on either side fails (a field C lacks also fails to compile).

    python3 tests/struct_layout.py SRC_DIR [CC]     exit 0 all equal, 1 a difference
"""
import ctypes
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
import tempfile


def mirrored(pkg):
    """(python name, class, C struct, header) for every hand-made Structure of the package."""
    out = []
    for m in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(pkg.__name__ + "." + m.name)
        for name, c in sorted(vars(mod).items()):
            if inspect.isclass(c) and issubclass(c, ctypes.Structure) and c.__module__ == mod.__name__:
                first = (c.__doc__ or "").strip().splitlines()[0] if c.__doc__ else ""
                hit = re.match(r"(hbm_\w+) \((hbm/\w+\.h)\)", first)
                if not hit:
                    raise SystemExit("%s.%s: its docstring must start 'hbm_NAME (hbm/HEADER.h)', the C struct "
                                     "it mirrors" % (mod.__name__, name))
                out.append(("%s.%s" % (m.name, name), c, hit.group(1), hit.group(2)))
    return out


def c_layout(structs, include, cc):
    """{C struct: (sizeof, {field: (offsetof, size)})} as the compiler lays them out."""
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += sorted({'#include "%s"' % h for _, _, _, h in structs})
    lines.append("int main(void) {")
    for _, cls, cname, _ in structs:
        lines.append('    printf("S %s %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in cls._fields_:
            lines.append('    printf("F %s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (cname, f[0], cname, f[0], cname, f[0]))
    lines += ["    return 0;", "}"]
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as fh:
            fh.write("\n".join(lines) + "\n")
        cp = subprocess.run([cc, "-std=c11", "-I", include, "-o", exe, src], capture_output=True, text=True)
        if cp.returncode:
            sys.stdout.write("the C side does not have what the Python side names:\n" + cp.stderr)
            return None
        text = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    layout = {}
    for line in text.splitlines():
        w = line.split()
        if w[0] == "S":
            layout[w[1]] = (int(w[2]), {})
        else:
            layout[w[1]][1][w[2]] = (int(w[3]), int(w[4]))
    return layout


def c_fields(include, header, cname):
    """The field names of typedef struct cname { ... } cname; in include/header, in order."""
    with open(os.path.join(include, header)) as fh:
        text = fh.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (cname, cname), text, re.S)
    if not body:
        raise SystemExit("%s: no 'typedef struct %s { ... } %s;' in %s" % (cname, cname, cname, header))
    names = []
    for decl in body.group(1).split(";"):
        words = decl.strip()
        if not words:
            continue
        for d in re.sub(r"\[[^]]*\]", "", words).split(","):  # "int a, b": the last word of each
            names.append(re.findall(r"\w+", d)[-1])
    return names


def compare(structs, layout, include):
    """The differences, one line each (none: the two sides agree)."""
    bad = []
    for pyname, cls, cname, header in structs:
        names = c_fields(include, header, cname)
        mine = [f[0] for f in cls._fields_]
        if names != mine:
            bad.append("%s (%s, %s): fields %s in C, %s in Python" % (cname, header, pyname, names, mine))
        size, fields = layout[cname]
        if ctypes.sizeof(cls) != size:
            bad.append("%s (%s, %s): sizeof %d in C, %d in Python" % (cname, header, pyname, size,
                                                                    ctypes.sizeof(cls)))
        for f in cls._fields_:
            d = getattr(cls, f[0])
            off, fsize = fields[f[0]]
            if (d.offset, d.size) != (off, fsize):
                bad.append("%s.%s (%s): offset %d size %d in C, offset %d size %d in Python"
                           % (cname, f[0], pyname, off, fsize, d.offset, d.size))
    return bad


def main():
    src = sys.argv[1]
    cc = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("CC", "cc")
    sys.path.insert(0, os.path.join(src, "python"))
    import hbm
    structs = mirrored(hbm)
    if not structs:
        raise SystemExit("no ctypes.Structure found in the hbm package")
    include = os.path.join(src, "include")
    layout = c_layout(structs, include, cc)
    if layout is None:
        return 1
    bad = compare(structs, layout, include)
    # the comparison itself can fail: the last field of each struct left out on the Python
    # side must show (in the field list even where padding keeps sizeof)
    for pyname, cls, cname, header in structs:
        short = type(cls.__name__ + "Short", (ctypes.Structure,), {"_fields_": cls._fields_[:-1]})
        if not compare([(pyname, short, cname, header)], layout, include):
            bad.append("%s: a mirror without its last field went unnoticed" % pyname)
    for pyname, cls, cname, header in structs:
        print("%-28s %-18s %-24s %3d bytes, %2d fields" % (cname, header, pyname, ctypes.sizeof(cls),
                                                          len(cls._fields_)))
    for b in bad:
        print("DIFFERENT: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
