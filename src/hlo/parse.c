/* parse.c - HLO text -> hbm_hlo_module. One pass over the text with a hand-written
 * scanner (no token list), everything allocated from the module's arena. Names are
 * resolved per computation once it is complete, computations once the file is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hbm/file.h"
#include "hlo/hlo_internal.h"

typedef struct parser {
    const char *p, *end, *base;
    const char *file;
    hbm_hlo_module *m;
    int depth;      /* shape nesting, bounded against hostile input */
    uint64_t total; /* bytes of every instruction's shape so far, checked against HBMI_MAX_BYTES */
    uint32_t tuple_refs; /* "#N" of operands "%x#N" read in the current computation */
} parser;

/* --- errors ---------------------------------------------------------------------------- */
static void where(const parser *ps, const char *at, uint32_t *line, uint32_t *col) {
    uint32_t l = 1;
    const char *ls = ps->base;
    for (const char *q = ps->base; q < at && q < ps->end; q++)
        if (*q == '\n') {
            l++;
            ls = q + 1;
        }
    *line = l;
    *col = (uint32_t)(at - ls) + 1;
}

static hbm_status fail(parser *ps, const char *what) {
    uint32_t line, col;
    const char *at = ps->p < ps->end ? ps->p : ps->end;
    where(ps, at, &line, &col);
    char snip[41];
    size_t k = 0;
    for (const char *q = at; q < ps->end && *q != '\n' && k < sizeof snip - 1; q++)
        snip[k++] = (*q >= 32 && *q < 127) ? *q : '?';
    snip[k] = 0;
    return hbmi_error_at(HBM_ERR_PARSE, ps->file, line, col, "%s, found %s%s%s", what,
                         k ? "'" : "end of input", snip, k ? "'" : "");
}

/* A size beyond HBMI_MAX_BYTES: the shape [at, ps->p) ("what" before it), or with total,
 * the module's values up to the instruction at at: an error naming it and its line. */
static hbm_status too_large(parser *ps, const char *at, const char *what, int total) {
    uint32_t line, col;
    where(ps, at, &line, &col);
    int n = (int)(ps->p - at);
    if (n > 80) n = 77;
    return hbmi_error_at(HBM_ERR_PARSE, ps->file, line, col, "%s%.*s%s: %s", what, n, at,
                         n == 77 ? "..." : "",
                         total ? "the module's values up to it hold more than 2^63 - 1 bytes (no sum of sizes fits)"
                               : "it holds more than 2^63 - 1 bytes, the most XLA allows (its sizes are int64)");
}

static hbm_status nomem(parser *ps) {
    return hbmi_error(HBM_ERR_NOMEM, "%s: out of host memory while parsing", ps->file);
}

/* n bytes of the module's arena; NULL (the caller returns nomem) when there are none */
static void *alloc(parser *ps, size_t n) { return hbmi_arena_alloc(&ps->m->arena, n ? n : 1); }

/* --- scanning --------------------------------------------------------------------------- */
static void skip_ws(parser *ps) {
    const char *p = ps->p, *e = ps->end;
    for (;;) {
        while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
        if (p + 1 < e && p[0] == '/' && p[1] == '*') {
            const char *q = p + 2;
            while (q + 1 < e && !(q[0] == '*' && q[1] == '/')) q++;
            p = q + 1 < e ? q + 2 : e;
            continue;
        }
        if (p + 1 < e && p[0] == '/' && p[1] == '/') {
            while (p < e && *p != '\n') p++;
            continue;
        }
        break;
    }
    ps->p = p;
}

static int peek(parser *ps) {
    skip_ws(ps);
    return ps->p < ps->end ? (unsigned char)*ps->p : -1;
}

static int accept(parser *ps, char c) {
    if (peek(ps) == (unsigned char)c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static hbm_status expect(parser *ps, char c, const char *what) { return accept(ps, c) ? HBM_OK : fail(ps, what); }

static int is_name_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '$';
}

/* A name, with an optional leading '%'. */
static hbmi_str name(parser *ps) {
    hbmi_str s = {0, 0};
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '%') ps->p++;
    const char *b = ps->p;
    while (ps->p < ps->end && is_name_char((unsigned char)*ps->p)) ps->p++;
    s.p = b;
    s.n = (uint32_t)(ps->p - b);
    return s;
}

static int word_is_(hbmi_str s, const char *w, size_t n) { return n == s.n && !memcmp(s.p, w, n); }
#define word_is(s, w) word_is_((s), (w), sizeof(w) - 1)

static hbm_status parse_int(parser *ps, int64_t *out) {
    skip_ws(ps);
    const char *p = ps->p;
    int neg = 0;
    if (p < ps->end && (*p == '-' || *p == '+')) neg = *p++ == '-';
    if (p >= ps->end || *p < '0' || *p > '9') return fail(ps, "expected an integer");
    uint64_t v = 0;
    while (p < ps->end && *p >= '0' && *p <= '9') {
        unsigned d = (unsigned)(*p++ - '0');
        if (v > (UINT64_MAX / 2 - d) / 10) {
            ps->p = p;
            return fail(ps, "integer too large");
        }
        v = v * 10 + d;
    }
    ps->p = p;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return HBM_OK;
}

/* Skip a string literal starting at ps->p (which is '"'). */
static hbm_status skip_string(parser *ps) {
    const char *p = ps->p + 1, *e = ps->end;
    while (p < e && *p != '"') p += (*p == '\\' && p + 1 < e) ? 2 : 1;
    if (p >= e) return fail(ps, "unterminated string");
    ps->p = p + 1;
    return HBM_OK;
}

static hbm_status string_lit(parser *ps, hbmi_str *s) {
    if (peek(ps) != '"') return fail(ps, "expected a string");
    const char *b = ps->p + 1;
    TRY(skip_string(ps));
    s->p = b;
    s->n = (uint32_t)(ps->p - 1 - b);
    return HBM_OK;
}

/* Skip one attribute value: balanced (), [], {}, strings; stops at a depth-0 ',' or newline,
 * or a depth-0 closer it did not open. */
static hbm_status skip_value(parser *ps) {
    char stack[64];
    int d = 0;
    const char *p = ps->p, *e = ps->end;
    while (p < e && (*p == ' ' || *p == '\t')) p++;
    const char *start = p;
    while (p < e) {
        char c = *p;
        if (c == '"') {
            ps->p = p;
            TRY(skip_string(ps));
            p = ps->p;
            continue;
        }
        if (c == '/' && p + 1 < e && p[1] == '*') {
            ps->p = p;
            skip_ws(ps);
            p = ps->p;
            continue;
        }
        if (c == '(' || c == '[' || c == '{') {
            if (d == (int)sizeof stack) {
                ps->p = p;
                return fail(ps, "value nested too deeply");
            }
            stack[d++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (c == ')' || c == ']' || c == '}') {
            if (!d) break;
            if (stack[d - 1] != c) {
                ps->p = p;
                return fail(ps, "mismatched bracket in attribute value");
            }
            d--;
        } else if (!d && (c == ',' || c == '\n')) {
            break;
        }
        p++;
    }
    ps->p = p;
    if (d) return fail(ps, "unbalanced brackets in attribute value");
    if (p == start) return fail(ps, "expected an attribute value");
    return HBM_OK;
}

/* Skip one bracketed group starting at ps->p ('(', '[' or '{'), strings inside included. */
static hbm_status skip_group(parser *ps) {
    char stack[64];
    int d = 0;
    const char *p = ps->p, *e = ps->end;
    while (p < e) {
        char c = *p;
        if (c == '"') {
            ps->p = p;
            TRY(skip_string(ps));
            p = ps->p;
            continue;
        }
        if (c == '(' || c == '[' || c == '{') {
            if (d == (int)sizeof stack) {
                ps->p = p;
                return fail(ps, "nested too deeply");
            }
            stack[d++] = c == '(' ? ')' : c == '[' ? ']' : '}';
        } else if (c == ')' || c == ']' || c == '}') {
            if (!d || stack[d - 1] != c) {
                ps->p = p;
                return fail(ps, "mismatched bracket");
            }
            if (--d == 0) {
                ps->p = p + 1;
                return HBM_OK;
            }
        }
        p++;
    }
    ps->p = p;
    return fail(ps, "unbalanced brackets");
}

/* --- shapes ------------------------------------------------------------------------------- */
/* Elements of s once padded to its tiles, as XLA defines a tiled layout (openxla/xla
 * docs/tiled_layout.md, "Repeated tiling"; xla/layout.h Tile): the dimensions in physical
 * order (major to minor, by minor_to_major) are tiled by the first tile, which pads the
 * last k of them to multiples of the tile's k dimensions (with leading 1s when the tile
 * has more dimensions than the shape) and so leaves the shape [d0, .., ceil(dn/tk), t1, ..,
 * tk]; each further tile applies the same way to the shape the previous one left, whose
 * minor dimensions are the previous tile's. "bf16[1024]{0:T(1024)(128)(2,1)}" is [1,1024],
 * then [1,8,128], then [1,4,128,2,1]: 1,024 elements; a (2,1) sub-tile of a (8,128) tile
 * pads only an odd tile row count. XLA:TPU's buffer assignment sizes every tiled value so
 * (docs/tpu.md, Rules). */
uint64_t hbmi_tiled_elements(const hbmi_shape *s, const int64_t *m2m, uint32_t n_m2m, const int64_t *tiles,
                             const uint32_t *tile_len, uint32_t n_tiles, const hbmi_split *split) {
    if (!n_tiles || n_m2m != s->n || s->n > 64) return 0;
    uint64_t phys[64 + 2 * 64 + 16]; /* rank, plus each tile's dimensions and leading 1s */
    uint32_t n = s->n, used = 0;
    for (uint32_t i = 0; i < n; i++) phys[i] = (uint64_t)s->dims[m2m[n - 1 - i]];
    /* a split dimension "SC(d:i,...)" (d physical, major first) counts as its largest piece:
     * LayoutUtil::MaxSplitSize, which ShapeUtil::ArraySize sizes a tiled shape with */
    if (split && split->n_idx && split->dim >= 0 && (uint64_t)split->dim < n) {
        uint64_t d = phys[split->dim], last = 0, most = 0;
        for (uint32_t i = 0; i < split->n_idx; i++) {
            uint64_t at = split->idx[i] < 0 ? 0 : (uint64_t)split->idx[i];
            if (at >= last && at - last > most) most = at - last;
            if (at > last) last = at;
        }
        if (d > last && d - last > most) most = d - last;
        phys[split->dim] = most;
    }
    for (uint32_t q = 0; q < n_tiles; q++) {
        uint32_t k = tile_len[q];
        const int64_t *t = tiles + used;
        used += k;
        if (k > n) { /* leading 1s */
            uint32_t lead = k - n;
            if (n + lead + k > sizeof phys / sizeof phys[0]) return 0;
            memmove(phys + lead, phys, sizeof *phys * n);
            for (uint32_t i = 0; i < lead; i++) phys[i] = 1;
            n += lead;
        }
        if (n + k > sizeof phys / sizeof phys[0]) return 0;
        for (uint32_t j = 0; j < k; j++) {
            uint64_t td = (uint64_t)t[j], d = phys[n - k + j];
            phys[n - k + j] = d / td + (d % td != 0);
            phys[n + j] = td;
        }
        n += k;
    }
    uint64_t elems = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (phys[i] && elems > UINT64_MAX / phys[i]) return UINT64_MAX;
        elems *= phys[i];
    }
    return elems;
}

static hbm_status parse_layout(parser *ps, hbmi_shape *s) {
    /* {1,0:T(8,128)(2,1)E(4)S(1)} ; ps->p is after '{' */
    int64_t m2m[64], tiles[64];
    uint32_t n_m2m = 0, n_tile_dims = 0, tile_len[16], n_tiles = 0;
    int in_m2m = 1, tiles_ok = 1;
    hbmi_split split = {-1, 0, {0}};
    for (;;) {
        int c = peek(ps);
        if (c == '}') {
            ps->p++;
            if (tiles_ok) s->tiled_elems = hbmi_tiled_elements(s, m2m, n_m2m, tiles, tile_len, n_tiles, &split);
            s->layout_key = hbmi_layout_key(m2m, n_m2m);
            return HBM_OK;
        }
        if (c == 'S' && ps->p + 2 < ps->end && ps->p[1] == 'C' && ps->p[2] == '(') { /* SC(0:952) */
            ps->p += 3;
            int64_t v;
            TRY(parse_int(ps, &v));
            TRY(expect(ps, ':', "expected ':' in a split config"));
            if (split.dim >= 0) tiles_ok = 0; /* more than one split: not seen; size unknown */
            split.dim = v;
            while (peek(ps) != ')') {
                TRY(parse_int(ps, &v));
                if (split.n_idx < 16) split.idx[split.n_idx++] = v;
                else tiles_ok = 0;
                if (!accept(ps, ',')) break;
            }
            TRY(expect(ps, ')', "expected ')' closing a split config"));
            continue;
        }
        if (c == ',') {
            ps->p++;
            continue;
        }
        if (c == ':') {
            ps->p++;
            in_m2m = 0;
            continue;
        }
        if (c >= '0' && c <= '9') {
            int64_t v;
            TRY(parse_int(ps, &v));
            if (in_m2m) {
                if (n_m2m < 64 && v >= 0 && (uint64_t)v < s->n) m2m[n_m2m++] = v;
                else tiles_ok = 0;
            }
            continue;
        }
        if ((c == 'E' || c == 'S') && ps->p + 1 < ps->end && ps->p[1] == '(') {
            ps->p += 2;
            int64_t v;
            TRY(parse_int(ps, &v));
            TRY(expect(ps, ')', "expected ')' in layout"));
            if (c == 'E') s->elem_bits = (uint16_t)(v > 0 && v < 64 ? v : 0);
            else s->memory_space = v;
            continue;
        }
        if (c == 'T' && ps->p + 1 < ps->end && ps->p[1] == '(') { /* T(8,128)(2,1) */
            ps->p++;
            while (peek(ps) == '(') {
                ps->p++;
                uint32_t k = 0;
                while (peek(ps) != ')') {
                    int64_t v;
                    if (peek(ps) == '*') { /* a combined dimension: sizes unknown to us */
                        ps->p++;
                        tiles_ok = 0;
                    } else {
                        TRY(parse_int(ps, &v));
                        if (v <= 0 || n_tile_dims >= 64) tiles_ok = 0;
                        else tiles[n_tile_dims++] = v, k++;
                    }
                    if (!accept(ps, ',')) break;
                }
                TRY(expect(ps, ')', "expected ')' closing a tile"));
                if (n_tiles < 16 && k && k <= 16) tile_len[n_tiles++] = k;
                else tiles_ok = 0;
            }
            continue;
        }
        if (c >= 'A' && c <= 'Z') { /* L(...), D(...), #(...) etc. */
            ps->p++;
            while (peek(ps) == '(') {
                TRY(skip_group(ps));
            }
            continue;
        }
        if (c == '*' || c == '#' || c == '+') {
            ps->p++;
            continue;
        }
        return fail(ps, "unexpected character in layout");
    }
}

static hbm_status parse_shape(parser *ps, hbmi_shape *s);

static hbm_status parse_tuple_shape(parser *ps, hbmi_shape *s) {
    /* after '(' */
    hbmi_shape tmp[16];
    hbmi_shape *elems = tmp;
    uint32_t n = 0, cap = 16;
    s->prim = HBMI_PRIM_TUPLE;
    if (peek(ps) != ')') {
        for (;;) {
            if (n == cap) {
                hbmi_shape *ne = alloc(ps, sizeof *ne * cap * 2);
                if (!ne) return nomem(ps);
                memcpy(ne, elems, sizeof *ne * n);
                elems = ne;
                cap *= 2;
            }
            memset(&elems[n], 0, sizeof elems[n]);
            TRY(parse_shape(ps, &elems[n]));
            n++;
            if (!accept(ps, ',')) break;
        }
    }
    TRY(expect(ps, ')', "expected ')' closing a tuple shape"));
    s->n = n;
    s->elems = alloc(ps, sizeof *s->elems * (n ? n : 1));
    if (!s->elems) return nomem(ps);
    memcpy(s->elems, elems, sizeof *elems * n);
    s->nodes = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (s->nodes > UINT32_MAX / 2) return fail(ps, "tuple shape too large");
        s->nodes += elems[i].nodes;
    }
    return HBM_OK;
}

static hbm_status parse_array_shape(parser *ps, hbmi_shape *s, hbmi_str prim) {
    int pr = hbmi_prim_lookup(prim.p, prim.n);
    if (pr < 0) {
        ps->p = prim.p;
        return fail(ps, "unknown element type");
    }
    s->prim = (uint8_t)pr;
    s->nodes = 1;
    TRY(expect(ps, '[', "expected '[' after the element type"));
    int64_t tmp[64];
    uint32_t n = 0;
    if (peek(ps) != ']') {
        for (;;) {
            int64_t v = 0;
            int c = peek(ps);
            if (c == '<' && ps->p + 1 < ps->end && ps->p[1] == '=') {
                ps->p += 2;
                s->dynamic = 1;
            }
            if (peek(ps) == '?') {
                ps->p++;
                s->dynamic = 1;
                v = 0;
            } else {
                TRY(parse_int(ps, &v));
            }
            if (v < 0) return fail(ps, "negative dimension");
            if (n == 64) return fail(ps, "too many dimensions");
            tmp[n++] = v;
            if (!accept(ps, ',')) break;
        }
    }
    TRY(expect(ps, ']', "expected ']' closing the dimensions"));
    s->n = n;
    if (n) {
        s->dims = alloc(ps, sizeof *s->dims * n);
        if (!s->dims) return nomem(ps);
        memcpy(s->dims, tmp, sizeof *tmp * n);
    }
    /* a layout follows directly ("f32[2]{0}"), not after whitespace */
    if (ps->p < ps->end && *ps->p == '{') {
        ps->p++;
        TRY(parse_layout(ps, s));
    }
    /* XLA's ValidateShapeSize (xla/shape_util.cc): the byte size must fit an int64 (f32[2^62,4] does
     * not); every sum of sizes after it is then bounded (see parse_instruction) */
    if (hbmi_shape_bytes(s, 8) > HBMI_MAX_BYTES) return too_large(ps, prim.p, "shape ", 0);
    return HBM_OK;
}

/* Bytes of a value of shape s: its arrays and tuple pointer tables; UINT64_MAX on overflow. */
static uint64_t value_bytes(const hbmi_shape *s) {
    uint64_t b = hbmi_shape_bytes(s, 8);
    for (uint32_t i = 0; s->prim == HBMI_PRIM_TUPLE && i < s->n && b != UINT64_MAX; i++) {
        uint64_t e = value_bytes(&s->elems[i]);
        b = e > UINT64_MAX - b ? UINT64_MAX : b + e;
    }
    return b;
}

static hbm_status parse_shape(parser *ps, hbmi_shape *s) {
    if (++ps->depth > 64) return fail(ps, "shape nested too deeply");
    hbm_status st;
    if (accept(ps, '(')) {
        st = parse_tuple_shape(ps, s);
    } else {
        hbmi_str prim = name(ps);
        if (!prim.n) st = fail(ps, "expected a shape");
        else st = parse_array_shape(ps, s, prim);
    }
    ps->depth--;
    return st;
}

/* --- attributes ----------------------------------------------------------------------------- */
static hbm_status parse_index(parser *ps, int32_t *idx, uint8_t *len) {
    /* {} or {1,0} */
    *len = 0;
    TRY(expect(ps, '{', "expected '{' starting a shape index"));
    while (peek(ps) != '}') {
        int64_t v;
        TRY(parse_int(ps, &v));
        if (*len < HBMI_MAX_INDEX) idx[(*len)++] = (int32_t)v;
        if (!accept(ps, ',')) break;
    }
    return expect(ps, '}', "expected '}' closing a shape index");
}

/* {{}: (0, {}), {1}: (1, {0}, may-alias)} for output_to_operand_aliasing and
 * input_output_alias; {(0, {}), (1, {})} for buffer_donor. */
static hbm_status parse_alias_list(parser *ps, hbmi_alias **out, uint32_t *n_out, int donor) {
    hbmi_alias tmp[32], *list = tmp;
    uint32_t n = 0, cap = 32;
    TRY(expect(ps, '{', "expected '{' starting an alias list"));
    while (peek(ps) != '}') {
        if (n == cap) {
            hbmi_alias *nl = alloc(ps, sizeof *nl * cap * 2);
            if (!nl) return nomem(ps);
            memcpy(nl, list, sizeof *nl * n);
            list = nl;
            cap *= 2;
        }
        hbmi_alias *a = &list[n];
        memset(a, 0, sizeof *a);
        if (!donor) {
            TRY(parse_index(ps, a->out, &a->out_len));
            TRY(expect(ps, ':', "expected ':' in an alias"));
        }
        TRY(expect(ps, '(', "expected '(' in an alias"));
        TRY(parse_int(ps, &a->operand));
        TRY(expect(ps, ',', "expected ',' in an alias"));
        TRY(parse_index(ps, a->in, &a->in_len));
        if (accept(ps, ',')) { /* may-alias / must-alias */
            hbmi_str kind = name(ps);
            if (!kind.n) return fail(ps, "expected may-alias or must-alias");
        }
        TRY(expect(ps, ')', "expected ')' closing an alias"));
        n++;
        if (!accept(ps, ',')) break;
    }
    TRY(expect(ps, '}', "expected '}' closing an alias list"));
    *out = alloc(ps, sizeof **out * (n ? n : 1));
    if (!*out) return nomem(ps);
    memcpy(*out, list, sizeof *list * n);
    *n_out = n;
    return HBM_OK;
}

static hbm_status parse_metadata(parser *ps, hbmi_instr *in) {
    TRY(expect(ps, '{', "expected '{' after metadata="));
    while (peek(ps) != '}') {
        hbmi_str key = name(ps);
        if (!key.n) return fail(ps, "expected a metadata key");
        TRY(expect(ps, '=', "expected '=' after a metadata key"));
        if (peek(ps) == '"') {
            hbmi_str v;
            TRY(string_lit(ps, &v));
            if (word_is(key, "op_name")) in->meta_op_name = v;
            else if (word_is(key, "source_file")) in->meta_source_file = v;
        } else if (word_is(key, "source_line")) {
            int64_t v;
            TRY(parse_int(ps, &v));
            in->meta_source_line = (int32_t)(v > 0 && v < INT32_MAX ? v : 0);
        } else {
            const char *b = ps->p;
            while (ps->p < ps->end && *ps->p != ' ' && *ps->p != '}' && *ps->p != '\n') ps->p++;
            if (ps->p == b) return fail(ps, "expected a metadata value");
            if (word_is(key, "stack_frame_id") && *b >= '1' && *b <= '9') { /* else no frame */
                int64_t v = 0;
                for (const char *q = b; q < ps->p && *q >= '0' && *q <= '9' && v < INT32_MAX; q++) v = v * 10 + (*q - '0');
                in->meta_frame = v < INT32_MAX ? (int32_t)v : 0;
            }
        }
        accept(ps, ',');
    }
    ps->p++;
    return HBM_OK;
}

static hbm_status add_called(parser *ps, hbmi_instr *in, hbmi_str nm, hbmi_called_role role) {
    uint32_t n = in->n_called;
    hbmi_str *names = alloc(ps, sizeof *names * (n + 1));
    uint8_t *roles = alloc(ps, n + 1);
    if (!names || !roles) return nomem(ps);
    if (n) {
        memcpy(names, in->called_names, sizeof *names * n);
        memcpy(roles, in->called_role, n);
    }
    names[n] = nm;
    roles[n] = (uint8_t)role;
    in->called_names = names;
    in->called_role = roles;
    in->n_called = n + 1;
    return HBM_OK;
}

static hbm_status parse_called(parser *ps, hbmi_instr *in, hbmi_called_role role) {
    if (accept(ps, '{')) {
        while (peek(ps) != '}') {
            hbmi_str nm = name(ps);
            if (!nm.n) return fail(ps, "expected a computation name");
            TRY(add_called(ps, in, nm, role));
            if (!accept(ps, ',')) break;
        }
        return expect(ps, '}', "expected '}' closing a computation list");
    }
    hbmi_str nm = name(ps);
    if (!nm.n) return fail(ps, "expected a computation name");
    return add_called(ps, in, nm, role);
}

static hbm_status parse_attribute(parser *ps, hbmi_instr *in) {
    hbmi_str key = name(ps);
    if (!key.n) return fail(ps, "expected an attribute name");
    TRY(expect(ps, '=', "expected '=' after an attribute name"));
    if (word_is(key, "metadata")) return parse_metadata(ps, in);
    if (word_is(key, "calls") || word_is(key, "called_computations")) return parse_called(ps, in, HBMI_CALLED_CALLS);
    if (word_is(key, "body")) return parse_called(ps, in, HBMI_CALLED_BODY);
    if (word_is(key, "condition")) return parse_called(ps, in, HBMI_CALLED_CONDITION);
    if (word_is(key, "branch_computations") || word_is(key, "true_computation") ||
        word_is(key, "false_computation"))
        return parse_called(ps, in, HBMI_CALLED_BRANCH);
    if (word_is(key, "to_apply")) return parse_called(ps, in, HBMI_CALLED_APPLY);
    if (word_is(key, "select") || word_is(key, "scatter")) /* select-and-scatter */
        return parse_called(ps, in, HBMI_CALLED_APPLY);
    if (word_is(key, "custom_call_target")) return string_lit(ps, &in->target);
    if (word_is(key, "output_to_operand_aliasing")) return parse_alias_list(ps, &in->alias, &in->n_alias, 0);
    if (word_is(key, "kind")) {
        hbmi_str k = name(ps);
        in->fusion_kind = (uint8_t)hbmi_fusion_kind_of(k.p, k.n);
        return k.n ? HBM_OK : fail(ps, "expected a fusion kind");
    }
    if (word_is(key, "index") && in->op == HOP_GTE) return parse_int(ps, &in->gte_index);
    return skip_value(ps);
}

/* --- instructions ------------------------------------------------------------------------------ */
static hbm_status parse_operands(parser *ps, hbmi_instr *in) {
    /* after '(' */
    hbmi_str tmp[16], *names = tmp;
    uint32_t n = 0, cap = 16;
    if (in->op == HOP_CONSTANT) {
        ps->p--; /* back to '(' */
        return skip_group(ps);
    }
    if (in->op == HOP_PARAMETER) {
        TRY(parse_int(ps, &in->param_no));
        return expect(ps, ')', "expected ')' after the parameter number");
    }
    while (peek(ps) != ')') {
        int c = peek(ps);
        if (c == '(') { /* tuple-shaped operand */
            hbmi_shape sh;
            memset(&sh, 0, sizeof sh);
            TRY(parse_shape(ps, &sh));
        } else {
            const char *save = ps->p;
            hbmi_str w = name(ps);
            if (!w.n) return fail(ps, "expected an operand");
            if (ps->p < ps->end && *ps->p == '[' && hbmi_prim_lookup(w.p, w.n) >= 0 && *save != '%') {
                hbmi_shape sh;
                memset(&sh, 0, sizeof sh);
                TRY(parse_array_shape(ps, &sh, w));
            } else {
                ps->p = save;
            }
        }
        hbmi_str nm = name(ps);
        if (!nm.n) return fail(ps, "expected an operand name");
        /* "%x#1": element 1 of x's tuple, as newer XLA prints an operand that older ones
         * printed as a get-tuple-element instruction (expand_tuple_refs); "%x#1#0" nests */
        while (ps->p + 1 < ps->end && *ps->p == '#' && ps->p[1] >= '0' && ps->p[1] <= '9') {
            if (ps->tuple_refs == UINT32_MAX) return fail(ps, "too many tuple element operands");
            ps->tuple_refs++;
            ps->p++;
            while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') ps->p++;
            nm.n = (uint32_t)(ps->p - nm.p);
        }
        if (n == cap) {
            hbmi_str *nn = alloc(ps, sizeof *nn * cap * 2);
            if (!nn) return nomem(ps);
            memcpy(nn, names, sizeof *nn * n);
            names = nn;
            cap *= 2;
        }
        names[n++] = nm;
        if (!accept(ps, ',')) break;
    }
    TRY(expect(ps, ')', "expected ')' closing the operand list"));
    in->n_ops = n;
    if (n) {
        in->op_names = alloc(ps, sizeof *names * n);
        in->ops = alloc(ps, sizeof *in->ops * n);
        if (!in->op_names || !in->ops) return nomem(ps);
        memcpy(in->op_names, names, sizeof *names * n);
    }
    return HBM_OK;
}

static hbm_status parse_instruction(parser *ps, hbmi_instr *in) {
    skip_ws(ps);
    in->off = (size_t)(ps->p - ps->base);
    hbmi_str nm = name(ps);
    if (word_is(nm, "ROOT")) {
        in->is_root = 1;
        nm = name(ps);
    }
    if (!nm.n) return fail(ps, "expected an instruction name");
    in->name = nm;
    in->param_no = -1;
    in->gte_index = -1;
    in->time = -1;
    TRY(expect(ps, '=', "expected '=' after the instruction name"));
    in->shape = alloc(ps, sizeof *in->shape);
    if (!in->shape) return nomem(ps);
    TRY(parse_shape(ps, in->shape));
    /* the module's values together stay below 2^63 bytes, so that no sum of them (an
     * allocation, the temp heap, a total) can overflow on its way */
    uint64_t b = value_bytes(in->shape);
    ps->total = b > UINT64_MAX - ps->total ? UINT64_MAX : ps->total + b;
    if (ps->total > HBMI_MAX_BYTES) return too_large(ps, in->name.p - (in->name.p[-1] == '%'), "", 1);
    hbmi_str opc = name(ps);
    if (!opc.n) return fail(ps, "expected an opcode");
    in->opcode = opc;
    in->op = (uint8_t)hbmi_op_lookup(opc.p, opc.n);
    TRY(expect(ps, '(', "expected '(' after the opcode"));
    TRY(parse_operands(ps, in));
    while (accept(ps, ','))
        TRY(parse_attribute(ps, in));
    return HBM_OK;
}

/* --- name tables ---------------------------------------------------------------------------------- */
static uint64_t hash_str(hbmi_str s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t i = 0; i < s.n; i++) h = (h ^ (unsigned char)s.p[i]) * 0x100000001b3ULL;
    return h;
}

typedef struct name_table {
    uint32_t *slot; /* index + 1, 0 = empty */
    uint32_t mask;
} name_table;

/* An empty table with room for n names. */
static hbm_status table_init(parser *ps, name_table *t, uint32_t n) {
    uint32_t cap = 16;
    while (cap < n * 2u + 2) cap *= 2;
    t->slot = hbmi_calloc(cap, sizeof *t->slot);
    if (!t->slot) return nomem(ps);
    t->mask = cap - 1;
    return HBM_OK;
}

static void table_put(name_table *t, hbmi_str s, uint32_t id) {
    uint32_t h = (uint32_t)hash_str(s) & t->mask;
    while (t->slot[h]) h = (h + 1) & t->mask;
    t->slot[h] = id + 1;
}

static hbm_status table_build(parser *ps, name_table *t, uint32_t n, hbmi_str (*get)(void *, uint32_t), void *ctx) {
    TRY(table_init(ps, t, n));
    for (uint32_t i = 0; i < n; i++) table_put(t, get(ctx, i), i);
    return HBM_OK;
}

static int64_t table_find(const name_table *t, hbmi_str s, hbmi_str (*get)(void *, uint32_t), void *ctx) {
    uint32_t h = (uint32_t)hash_str(s) & t->mask;
    while (t->slot[h]) {
        hbmi_str o = get(ctx, t->slot[h] - 1);
        if (o.n == s.n && !memcmp(o.p, s.p, s.n)) return t->slot[h] - 1;
        h = (h + 1) & t->mask;
    }
    return -1;
}

static hbmi_str instr_name(void *ctx, uint32_t i) { return ((hbmi_comp *)ctx)->ins[i].name; }
static hbmi_str comp_name(void *ctx, uint32_t i) { return ((hbm_hlo_module *)ctx)->comps[i].name; }

/* the instructions of a computation being expanded: ids below c->n are the ones written,
 * c->n + k is out[k] (an instruction made for "%x#N", or a written one copied) */
typedef struct expanding {
    const hbmi_comp *c;
    const hbmi_instr *out;
} expanding;
static const hbmi_instr *expanding_at(const expanding *e, uint32_t id) {
    return id < e->c->n ? &e->c->ins[id] : &e->out[id - e->c->n];
}
static hbmi_str expanding_name(void *ctx, uint32_t id) { return expanding_at(ctx, id)->name; }

/* The operands written "%x#N" (element N of tuple-shaped x) become what older XLA printed
 * for them: an instruction "x#N = get-tuple-element(x), index=N", placed just before its
 * first user, one per name in a computation. A get-tuple-element defines no buffer (it
 * aliases the element), so the plan is the same as for the module printed the old way. */
static hbm_status expand_tuple_refs(parser *ps, hbmi_comp *c) {
    uint32_t extra = ps->tuple_refs; /* at most one instruction per "#N" read */
    ps->tuple_refs = 0;
    if (!extra) return HBM_OK;
    if (extra > UINT32_MAX - c->n) return fail(ps, "too many instructions");
    hbmi_instr *out = alloc(ps, sizeof *out * (c->n + extra));
    if (!out) return nomem(ps);
    name_table t; /* the names written (a use may come before its definition), then those made here */
    TRY(table_init(ps, &t, c->n + extra));
    expanding e = {c, out};
    for (uint32_t i = 0; i < c->n; i++) table_put(&t, c->ins[i].name, i);
    uint32_t n = 0, root = 0;
    hbm_status st = HBM_OK;
    for (uint32_t i = 0; i < c->n && !st; i++) {
        hbmi_instr *in = &c->ins[i];
        for (uint32_t k = 0; k < in->n_ops && !st; k++) {
            hbmi_str full = in->op_names[k];
            uint32_t cut = 0;
            while (cut < full.n && full.p[cut] != '#') cut++;
            while (cut < full.n) { /* the prefix up to each '#N' in turn */
                uint32_t end = cut + 1;
                while (end < full.n && full.p[end] != '#') end++;
                hbmi_str base = {full.p, cut}, ref = {full.p, end};
                if (table_find(&t, ref, expanding_name, &e) < 0) { /* not made yet (no written name has a '#') */
                    int64_t b = table_find(&t, base, expanding_name, &e);
                    const hbmi_shape *sh = b < 0 ? NULL : expanding_at(&e, (uint32_t)b)->shape;
                    int64_t idx = -1; /* at most 9 digits: no tuple has more elements */
                    if (end - cut <= 10) {
                        idx = 0;
                        for (uint32_t q = cut + 1; q < end; q++) idx = idx * 10 + (full.p[q] - '0');
                    }
                    if (!sh || sh->prim != HBMI_PRIM_TUPLE || idx < 0 || idx >= (int64_t)sh->n) {
                        ps->p = full.p;
                        st = fail(ps, !sh ? "operand is not defined in this computation"
                                          : "operand element (#N) is not in the tuple shape of the instruction it names");
                        break;
                    }
                    hbmi_instr *g = &out[n];
                    memset(g, 0, sizeof *g);
                    g->name = ref;
                    g->opcode.p = "get-tuple-element";
                    g->opcode.n = (uint32_t)strlen(g->opcode.p);
                    g->op = HOP_GTE;
                    g->synthetic = 1;
                    g->shape = &sh->elems[idx];
                    g->n_ops = 1;
                    g->op_names = alloc(ps, sizeof *g->op_names);
                    g->ops = alloc(ps, sizeof *g->ops);
                    if (!g->op_names || !g->ops) {
                        st = nomem(ps);
                        break;
                    }
                    g->op_names[0] = base;
                    g->param_no = -1;
                    g->gte_index = idx;
                    g->time = -1;
                    g->off = in->off;
                    table_put(&t, ref, c->n + n++);
                }
                cut = end;
            }
        }
        if (st) break;
        if (i == c->root) root = n;
        out[n++] = *in;
    }
    if (!st) {
        ps->m->tuple_refs = 1;
        c->root = root;
        c->ins = out;
        c->n = n;
    }
    hbmi_free(t.slot);
    return st;
}

/* names[0..n) through the table t (get, ctx: its entries' names) into out; a name not in the
 * table, or naming self, fails at the name with undefined or itself. */
static hbm_status resolve_names(parser *ps, const name_table *t, hbmi_str (*get)(void *, uint32_t), void *ctx,
                                const hbmi_str *names, uint32_t n, uint32_t self, uint32_t *out, const char *undefined,
                                const char *itself) {
    for (uint32_t k = 0; k < n; k++) {
        int64_t j = table_find(t, names[k], get, ctx);
        if (j < 0 || (uint32_t)j == self) {
            ps->p = names[k].p;
            return fail(ps, j < 0 ? undefined : itself);
        }
        out[k] = (uint32_t)j;
    }
    return HBM_OK;
}

static hbm_status resolve_operands(parser *ps, hbmi_comp *c) {
    TRY(expand_tuple_refs(ps, c));
    name_table t;
    TRY(table_build(ps, &t, c->n, instr_name, c));
    hbm_status st = HBM_OK;
    for (uint32_t i = 0; i < c->n && !st; i++) {
        hbmi_instr *in = &c->ins[i];
        st = resolve_names(ps, &t, instr_name, c, in->op_names, in->n_ops, i, in->ops,
                           "operand is not defined in this computation", "instruction uses itself");
    }
    hbmi_free(t.slot);
    return st;
}

static hbm_status resolve_computations(parser *ps) {
    hbm_hlo_module *m = ps->m;
    name_table t;
    TRY(table_build(ps, &t, m->n_comps, comp_name, m));
    hbm_status st = HBM_OK;
    for (uint32_t ci = 0; ci < m->n_comps && !st; ci++) {
        hbmi_comp *c = &m->comps[ci];
        for (uint32_t i = 0; i < c->n && !st; i++) {
            hbmi_instr *in = &c->ins[i];
            if (!in->n_called) continue;
            in->called = alloc(ps, sizeof *in->called * in->n_called);
            if (!in->called) {
                st = nomem(ps);
                break;
            }
            st = resolve_names(ps, &t, comp_name, m, in->called_names, in->n_called, ci, in->called,
                               "called computation is not defined", "computation calls itself");
        }
    }
    hbmi_free(t.slot);
    return st;
}

/* --- computations and the module ------------------------------------------------------------------ */
static hbm_status parse_computation(parser *ps, hbmi_comp *c) {
    hbmi_str nm = name(ps);
    if (word_is(nm, "ENTRY")) {
        c->is_entry = 1;
        nm = name(ps);
    }
    if (!nm.n) return fail(ps, "expected a computation name");
    c->name = nm;
    if (peek(ps) == '(') {
        TRY(skip_group(ps)); /* (param: shape, ...) */
        if (peek(ps) == '-' && ps->p + 1 < ps->end && ps->p[1] == '>') {
            ps->p += 2;
            hbmi_shape sh;
            memset(&sh, 0, sizeof sh);
            TRY(parse_shape(ps, &sh));
        }
    }
    TRY(expect(ps, '{', "expected '{' opening the computation body"));
    ps->tuple_refs = 0;
    hbmi_instr tmp[64], *ins = tmp;
    uint32_t n = 0, cap = 64;
    int has_root = 0;
    hbm_status st;
    while (peek(ps) != '}') {
        /* every early return below frees the growing array: it is not in the arena */
        if (peek(ps) < 0) {
            st = fail(ps, "expected '}' closing the computation");
            goto fail_body;
        }
        if (n == cap) {
            if (cap > UINT32_MAX / 4) {
                st = fail(ps, "too many instructions");
                goto fail_body;
            }
            hbmi_instr *ni = hbmi_malloc(sizeof *ni * cap * 2);
            if (!ni) {
                st = nomem(ps);
                goto fail_body;
            }
            memcpy(ni, ins, sizeof *ni * n);
            if (ins != tmp) hbmi_free(ins);
            ins = ni;
            cap *= 2;
        }
        memset(&ins[n], 0, sizeof ins[n]);
        if ((st = parse_instruction(ps, &ins[n]))) goto fail_body;
        if (ins[n].is_root) {
            c->root = n;
            has_root = 1;
        }
        n++;
    }
    ps->p++; /* '}' */
    if (!n) {
        if (ins != tmp) hbmi_free(ins);
        return fail(ps, "computation has no instructions");
    }
    if (!has_root) {
        c->root = n - 1;
        ins[n - 1].is_root = 1;
    }
    c->n = n;
    c->ins = alloc(ps, sizeof *c->ins * n);
    if (c->ins) memcpy(c->ins, ins, sizeof *ins * n);
    if (ins != tmp) hbmi_free(ins);
    if (!c->ins) return nomem(ps);
    /* ", execution_thread="parallel"" and friends after the closing brace */
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t')) ps->p++;
    while (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        hbmi_str key = name(ps);
        if (!key.n) return fail(ps, "expected a computation attribute");
        TRY(expect(ps, '=', "expected '=' after a computation attribute"));
        if (word_is(key, "execution_thread")) {
            TRY(string_lit(ps, &c->exec_thread));
        } else {
            TRY(skip_value(ps));
        }
        while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t')) ps->p++;
    }
    return resolve_operands(ps, c);
fail_body:
    if (ins != tmp) hbmi_free(ins);
    return st;
}

static int is_section_keyword(hbmi_str w) {
    return word_is(w, "FileNames") || word_is(w, "FunctionNames") || word_is(w, "FileLocations") ||
           word_is(w, "StackFrames");
}

static void skip_line(parser *ps) {
    while (ps->p < ps->end && *ps->p != '\n') ps->p++;
}

static hbm_status parse_header(parser *ps) {
    hbm_hlo_module *m = ps->m;
    hbmi_str kw = name(ps);
    if (!word_is(kw, "HloModule")) {
        /* another kind of file (a snapshot, a profile, a CSV) is named, not quoted */
        hbm_file_kind k = hbm_file_sniff(ps->base, (size_t)(ps->end - ps->base));
        if (k == HBM_FILE_EMPTY) return hbmi_error(HBM_ERR_PARSE, "%s: empty file", ps->file);
        if (k != HBM_FILE_UNKNOWN && k != HBM_FILE_HLO)
            return hbmi_error(HBM_ERR_PARSE, "%s is %s, not an HLO module (text)", ps->file, hbm_file_kind_str(k));
        ps->p = kw.p ? kw.p : ps->p;
        return fail(ps, "expected 'HloModule'");
    }
    m->name = name(ps);
    if (!m->name.n) return fail(ps, "expected the module name");
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t')) ps->p++;
    while (ps->p < ps->end && *ps->p == ',') {
        ps->p++;
        hbmi_str key = name(ps);
        if (!key.n) return fail(ps, "expected a module attribute");
        TRY(expect(ps, '=', "expected '=' after a module attribute"));
        if (word_is(key, "is_scheduled")) {
            hbmi_str v = name(ps);
            m->is_scheduled = word_is(v, "true");
        } else if (word_is(key, "input_output_alias")) {
            TRY(parse_alias_list(ps, &m->io_alias, &m->n_io_alias, 0));
        } else if (word_is(key, "buffer_donor")) {
            TRY(parse_alias_list(ps, &m->donors, &m->n_donors, 1));
        } else {
            TRY(skip_value(ps));
        }
        while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t')) ps->p++;
    }
    return HBM_OK;
}

static hbm_status parse_module(parser *ps) {
    hbm_hlo_module *m = ps->m;
    TRY(parse_header(ps));
    hbmi_comp *comps = NULL;
    size_t cap = 0;
    uint32_t n = 0;
    int entry = -1;
    hbm_status st = HBM_OK;
    while (!st && peek(ps) >= 0) {
        const char *save = ps->p;
        hbmi_str w = name(ps);
        if (is_section_keyword(w)) { /* stack-frame tables: "FileNames\n1 \"a.py\"\n..." */
            skip_line(ps);
            for (;;) {
                int c = peek(ps);
                if (c < 0 || !((c >= '0' && c <= '9') || c == '"')) break;
                skip_line(ps);
            }
            continue;
        }
        ps->p = save;
        if (hbmi_grow((void **)&comps, &cap, (size_t)n + 1, sizeof *comps) != HBM_OK) {
            st = nomem(ps);
            break;
        }
        memset(&comps[n], 0, sizeof comps[n]);
        comps[n].off = (size_t)(ps->p - ps->base);
        if ((st = parse_computation(ps, &comps[n]))) break;
        if (comps[n].is_entry) {
            if (entry >= 0) {
                ps->p = save;
                st = fail(ps, "second ENTRY computation");
                break;
            }
            entry = (int)n;
        }
        n++;
    }
    if (!st && !n) st = fail(ps, "expected a computation");
    if (!st) {
        m->comps = alloc(ps, sizeof *comps * n);
        if (m->comps) memcpy(m->comps, comps, sizeof *comps * n);
        else st = nomem(ps);
    }
    hbmi_free(comps);
    if (st) return st;
    m->n_comps = n;
    m->entry = entry >= 0 ? (uint32_t)entry : n - 1; /* XLA: the last one is the entry */
    m->comps[m->entry].is_entry = 1;
    return resolve_computations(ps);
}

hbm_status hbm_hlo_parse(const char *text, size_t len, const char *nm, hbm_hlo_module **out) {
    if (!out || (!text && len)) return hbmi_error(HBM_ERR_INVALID, "hlo: NULL argument");
    *out = NULL;
    hbm_hlo_module *m = hbmi_calloc(1, sizeof *m);
    if (!m) return hbmi_error(HBM_ERR_NOMEM, "hlo: out of host memory");
    m->text = hbmi_malloc(len + 1);
    if (!m->text) {
        hbmi_free(m);
        return hbmi_error(HBM_ERR_NOMEM, "hlo: out of host memory copying %zu bytes", len);
    }
    if (len) memcpy(m->text, text, len);
    m->text[len] = 0;
    m->len = len;
    snprintf(m->path, sizeof m->path, "%s", nm ? nm : "<hlo>");
    parser ps = {m->text, m->text + len, m->text, m->path, m, 0, 0, 0};
    if (len >= 3 && !memcmp(m->text, "\xef\xbb\xbf", 3)) ps.p += 3; /* a UTF-8 byte-order mark (Windows editors) */
    hbm_status s = parse_module(&ps);
    if (s) {
        hbm_hlo_module_free(m);
        return s;
    }
    hbm_status fs = hbmi_hlo_text_frames(m);
    if (fs) {
        hbm_hlo_module_free(m);
        return fs;
    }
    m->host_bytes = len + 1 + m->arena.total + sizeof *m;
    *out = m;
    return HBM_OK;
}

void hbm_hlo_module_free(hbm_hlo_module *m) {
    if (!m) return;
    hbmi_arena_free(&m->arena);
    hbmi_free(m->text);
    hbmi_free(m->text_old);
    hbmi_free(m);
}

void hbmi_hlo_where(const hbm_hlo_module *m, size_t off, uint32_t *line, uint32_t *col) {
    parser ps = {m->text, m->text + m->len, m->text, m->path, NULL, 0, 0, 0};
    where(&ps, m->text + (off < m->len ? off : m->len), line, col);
}

/* --- accessors --------------------------------------------------------------------------------------- */
const char *hbm_hlo_module_name(const hbm_hlo_module *m) {
    static _Thread_local char buf[256];
    if (!m) return "";
    snprintf(buf, sizeof buf, "%.*s", (int)m->name.n, m->name.p);
    return buf;
}

int hbm_hlo_is_scheduled(const hbm_hlo_module *m) { return m ? m->is_scheduled : 0; }
size_t hbm_hlo_computation_count(const hbm_hlo_module *m) { return m ? m->n_comps : 0; }
uint64_t hbm_hlo_host_bytes(const hbm_hlo_module *m) { return m ? m->host_bytes : 0; }

size_t hbm_hlo_instruction_count(const hbm_hlo_module *m) {
    size_t n = 0;
    for (uint32_t i = 0; m && i < m->n_comps; i++) n += m->comps[i].n;
    return n;
}

hbm_status hbm_hlo_computation_info(const hbm_hlo_module *m, size_t i, const char **nm, size_t *n_ins,
                                    int *is_entry) {
    static _Thread_local char buf[256];
    if (!m || i >= m->n_comps) return hbmi_error(HBM_ERR_INVALID, "hlo: no computation %zu", i);
    const hbmi_comp *c = &m->comps[i];
    snprintf(buf, sizeof buf, "%.*s", (int)c->name.n, c->name.p);
    if (nm) *nm = buf;
    if (n_ins) *n_ins = c->n;
    if (is_entry) *is_entry = c->is_entry;
    return HBM_OK;
}

hbm_status hbm_hlo_instruction(const hbm_hlo_module *m, size_t comp, size_t i, hbm_hlo_instruction_info *out) {
    if (!m || !out || comp >= m->n_comps || i >= m->comps[comp].n)
        return hbmi_error(HBM_ERR_INVALID, "hlo: no instruction %zu in computation %zu", i, comp);
    const hbmi_instr *in = &m->comps[comp].ins[i];
    memset(out, 0, sizeof *out);
    out->name = in->name.p;
    out->name_len = in->name.n;
    out->opcode = in->opcode.p;
    out->opcode_len = in->opcode.n;
    out->op_name = in->meta_op_name.p ? in->meta_op_name.p : "";
    out->op_name_len = in->meta_op_name.n;
    out->source_file = in->meta_source_file.p ? in->meta_source_file.p : "";
    out->source_file_len = in->meta_source_file.n;
    out->source_line = in->meta_source_line;
    out->is_root = in->is_root;
    out->n_operands = in->n_ops;
    out->bytes = hbmi_shape_bytes(in->shape, 8);
    hbmi_shape_print(in->shape, out->shape, sizeof out->shape);
    return HBM_OK;
}

hbm_status hbm_hlo_shape_bytes(const char *shape, unsigned pointer_size, uint64_t *bytes) {
    if (!shape || !bytes) return hbmi_error(HBM_ERR_INVALID, "hlo: NULL argument");
    hbm_hlo_module tmpm;
    memset(&tmpm, 0, sizeof tmpm);
    size_t len = strlen(shape);
    parser ps = {shape, shape + len, shape, "shape", &tmpm, 0, 0, 0};
    hbmi_shape s;
    memset(&s, 0, sizeof s);
    hbm_status st = parse_shape(&ps, &s);
    if (!st && peek(&ps) >= 0) st = fail(&ps, "unexpected text after the shape");
    if (!st) *bytes = hbmi_shape_bytes(&s, pointer_size);
    hbmi_arena_free(&tmpm.arena);
    return st;
}
