#!/usr/bin/env python3
"""png_check.py - decode a PNG with zlib only (8-bit RGB/RGBA, non-interlaced) and check it
is not blank: prints its size, distinct colours and the share of non-background pixels;
exits 1 when there are fewer than MIN_COLORS colours or under MIN_INK of the pixels differ
from the most common (background) colour.

usage: png_check.py FILE.png [MIN_COLORS] [MIN_INK]
"""
import struct
import sys
import zlib


def decode(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    i, idat, w = 8, b"", None
    while i < len(data):
        n, kind = struct.unpack(">I4s", data[i:i + 8])
        body = data[i + 8:i + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        i += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, pos = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[pos], bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def main():
    w, h, bpp, rows = decode(sys.argv[1])
    min_colors = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    min_ink = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    counts = {}
    for r in rows[::2]:
        for x in range(0, len(r), bpp * 2):
            px = r[x:x + 3]
            counts[px] = counts.get(px, 0) + 1
    total = sum(counts.values())
    ink = 1 - max(counts.values()) / total
    print("png %dx%d: %d colours, %.1f%% non-background" % (w, h, len(counts), 100 * ink))
    if len(counts) < min_colors or ink < min_ink:
        print("FAIL: the screenshot looks blank")
        sys.exit(1)


main()
