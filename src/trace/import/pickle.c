/* pickle.c - a reader for the subset of Python's pickle protocols 2-4 that plain data
 * uses (dicts, lists, tuples, sets, str, bytes, int, float, bool, None, memo). It runs
 * the pickle machine on an explicit stack, so deep nesting cannot overflow the C stack,
 * and refuses anything that would import or call (GLOBAL, REDUCE, ...), naming the
 * opcode and its byte offset. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "core/internal.h"
#include "trace/import/pyval.h"

/* The memo, for the indices the pickle reads back only (a snapshot stores every dict and
 * list it writes, and reads back only the shared ones): a bit per index below nbits, the
 * values of those set in rank order, and a map for larger indices (explicit ones). */
typedef struct memo {
    uint64_t *bits;
    uint32_t *rank; /* set bits before each word */
    size_t nwords, nbits;
    hbmi_pv **val;
    hbmi_map far; /* index -> value + 1 (0: read back, not stored yet) */
    uint64_t gen;  /* + 1 each time an index is stored again (what earlier reads meant changes) */
    struct {
        size_t idx; /* + 1; 0: empty */
        hbmi_pv *v;
    } recent[1024]; /* the last values read back, by index (a snapshot reads its frames again and again) */
} memo;

/* Lists of memo references met before (a snapshot's stacks: "( j.. j.. ... e"), by their
 * bytes: the kept list they made. */
typedef struct ref_list {
    unsigned char *bytes;
    size_t len;
    uint64_t gen;
    hbmi_pv *list;
} ref_list;

/* The fields of a trace entry the fast path reads (entry_fast). */
enum { F_ACTION, F_ADDR, F_SIZE, F_STREAM, F_TIME, F_FRAMES, F_DFREE, F_OTHER, F_N = F_OTHER };

typedef struct pk {
    const unsigned char *p;
    size_t len, off;
    const char *name;
    hbmi_pvpool *pool;
    hbmi_pv **stack;
    size_t sn, scap;
    size_t *marks;
    size_t mn, mcap;
    memo memo;
    size_t memo_top; /* highest index stored + 1 */
    hbmi_map ref_by_hash; /* hash of the bytes -> index in refs + 1 */
    const hbmi_pv *fkey[F_N]; /* the key values of a trace entry's fields met so far */
    ref_list *refs;
    size_t nrefs, refs_cap;
    struct {
        size_t at, len;
    } *spans; /* the bytes of the list stack_at reads that say what it holds */
    size_t nspans, spans_cap;
    struct {
        size_t idx;   /* a memo index the pickle reads back */
        uint32_t pos; /* the item of the list stack_at reads stored there */
    } *own; /* frame dicts of that list that are read back (a frame met twice in one stack) */
    size_t nown, own_cap;
    uint32_t *rel; /* (item, earlier item it reads back) pairs of that list, its own references */
    size_t nrel, rel_cap;
} pk;

static hbm_status perr(pk *k, size_t at, const char *what) {
    return hbmi_error(HBM_ERR_PARSE, "%s: pickle byte offset %zu: %s", k->name, at, what);
}

static hbm_status nomem(void) { return hbmi_error(HBM_ERR_NOMEM, "out of host memory reading a pickle"); }

static inline hbm_status push(pk *k, hbmi_pv *v) {
    if (!v || (k->sn == k->scap && hbmi_grow((void **)&k->stack, &k->scap, k->sn + 1, sizeof *k->stack))) return nomem();
    k->stack[k->sn++] = v;
    return HBM_OK;
}

static int need(pk *k, size_t n) { return k->len - k->off >= n; }

/* The data ends inside an opcode or before STOP: a file cut short (a copy or a download
 * that stopped), said so rather than as the opcode that lacks its bytes. */
static hbm_status ends_early(pk *k) {
    return hbmi_error(HBM_ERR_PARSE, "%s: the file ends early (truncated at byte %zu of a pickle)", k->name, k->len);
}

static inline uint64_t le(const unsigned char *p, int n) {
    switch (n) { /* the common widths in one load each (compilers fold the shifts) */
    case 1: return p[0];
    case 2: return (uint64_t)p[0] | (uint64_t)p[1] << 8;
    case 4: return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
    default: break;
    }
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* LONG1/LONG4's value: n (at most 9) little-endian bytes of two's complement; 9 bytes
 * (values from 2^63 to 2^64) wrap, as addresses do. */
static int64_t long_value(const unsigned char *p, size_t n) {
    uint64_t v = n ? le(p, (int)(n > 8 ? 8 : n)) : 0;
    if (n && n < 8 && (p[n - 1] & 0x80)) v |= ~0ULL << (8 * n); /* sign-extend */
    return (int64_t)v;
}

static hbm_status new_str(pk *k, hbmi_pvtype type, size_t n, size_t at) {
    if (!need(k, n)) return ends_early(k);
    hbmi_pv *v = hbmi_pv_new(k->pool, type);
    if (!v || !(v->s = hbmi_malloc(n + 1))) return nomem();
    memcpy(v->s, k->p + k->off, n);
    v->s[n] = 0;
    v->len = n;
    k->off += n;
    return push(k, v);
}

static hbm_status new_int(pk *k, int64_t i) {
    hbmi_pv *v = hbmi_pv_new(k->pool, PV_INT);
    if (!v) return nomem();
    v->i = i;
    return push(k, v);
}

/* Pop back to the top mark; items are k->stack[*from .. sn). */
static hbm_status pop_mark(pk *k, size_t at, size_t *from) {
    if (!k->mn) return perr(k, at, "no MARK before this opcode");
    *from = k->marks[--k->mn];
    if (*from > k->sn) return perr(k, at, "MARK above the stack");
    return HBM_OK;
}

static inline size_t popcount(uint64_t x) { /* without the CPU's instruction, which x86-64's baseline lacks */
    x -= (x >> 1) & 0x5555555555555555ull;
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
    return (size_t)((x * 0x0101010101010101ull) >> 56);
}

/* Where the value of a memo index read back lives; NULL for an index never read back. */
static inline hbmi_pv **memo_slot(memo *m, size_t idx) {
    if (idx < m->nbits) {
        uint64_t w = m->bits[idx / 64], bit = 1ull << (idx % 64);
        return w & bit ? &m->val[m->rank[idx / 64] + popcount(w & (bit - 1))] : NULL;
    }
    return NULL;
}

/* Values stored under an index the pickle never reads back are not kept. */
static hbm_status memo_store(pk *k, size_t idx, hbmi_pv *v) {
    if (idx + 1 > k->memo_top) k->memo_top = idx + 1;
    hbmi_pv **slot = memo_slot(&k->memo, idx);
    size_t r = idx % (sizeof k->memo.recent / sizeof k->memo.recent[0]);
    if (k->memo.recent[r].idx == idx + 1) k->memo.recent[r].v = v; /* stored again: the new value */
    if (slot) {
        k->memo.gen += *slot != NULL && *slot != v;
        *slot = v;
    } else {
        if (idx < k->memo.nbits || !hbmi_map_get(&k->memo.far, idx, NULL)) return HBM_OK;
        k->memo.gen++; /* the rare indices of the map: counted as changed */
        if (hbmi_map_put(&k->memo.far, idx, (uint64_t)(uintptr_t)v + 1)) return nomem();
    }
    v->keep = 1; /* shared from now on */
    return HBM_OK;
}

static hbm_status memo_put(pk *k, size_t idx, size_t at) {
    return k->sn ? memo_store(k, idx, k->stack[k->sn - 1]) : perr(k, at, "memo store with an empty stack");
}

/* A memo store at p[*q] (BINPUT, LONG_BINPUT, MEMOIZE with the next index top): its index,
 * else SIZE_MAX (*q unchanged). */
static size_t put_at(const pk *k, size_t *q, size_t top) {
    const unsigned char *p = k->p;
    if (*q + 2 <= k->len && p[*q] == 'q') return *q += 2, p[*q - 1];
    if (*q + 5 <= k->len && p[*q] == 'r') return *q += 5, (size_t)le(p + *q - 4, 4);
    if (*q < k->len && p[*q] == 0x94) return *q += 1, top;
    return SIZE_MAX;
}

static hbmi_pv *memo_get(pk *k, size_t idx) {
    memo *m = &k->memo;
    size_t r = idx % (sizeof m->recent / sizeof m->recent[0]);
    if (m->recent[r].idx == idx + 1) return m->recent[r].v;
    hbmi_pv **slot = memo_slot(m, idx);
    uint64_t v = 0;
    if (slot && *slot) m->recent[r].idx = idx + 1, m->recent[r].v = *slot;
    if (slot) return *slot;
    return idx >= k->memo.nbits && hbmi_map_get(&k->memo.far, idx, &v) && v ? (hbmi_pv *)(uintptr_t)(v - 1) : NULL;
}

static void memo_free(memo *m) {
    hbmi_free(m->bits);
    hbmi_free(m->rank);
    hbmi_free(m->val);
    hbmi_map_destroy(&m->far);
}

/* A memo index read back: a bit below len (a pickle stores fewer values than its bytes),
 * the map above. */
static inline hbm_status memo_read_back(pk *k, size_t idx) {
    memo *m = &k->memo;
    if (idx >= k->len) return hbmi_map_put(&m->far, idx, 0) ? nomem() : HBM_OK;
    if (idx / 64 >= m->nwords) {
        size_t old = m->nwords, cap = m->nwords;
        if (hbmi_grow((void **)&m->bits, &cap, idx / 64 + 1, sizeof *m->bits)) return nomem();
        memset(m->bits + old, 0, (cap - old) * sizeof *m->bits);
        m->nwords = cap;
    }
    m->bits[idx / 64] |= 1ull << (idx % 64);
    return HBM_OK;
}

/* The memo indices the pickle reads back (BINGET, LONG_BINGET): one pass over the opcodes,
 * skipping their arguments. It stops where the data is malformed; the parse reports it. */
static hbm_status memo_scan(pk *k) {
    size_t off = 0, len = k->len;
    const unsigned char *p = k->p;
    while (off < len) {
        unsigned op = p[off++];
        size_t skip = 0, w = 0;
        switch (op) {
        case 0x80: case 'K': case 'q': skip = 1; break;
        case 'M': skip = 2; break;
        case 'J': case 'r': skip = 4; break;
        case 0x95: case 'G': skip = 8; break;
        case 0x8a: case 0x8c: case 'U': case 'C': w = 1; break;
        case 0x8b: case 'X': case 'T': case 'B': w = 4; break;
        case 0x8d: case 0x8e: w = 8; break;
        case 'h': case 'j': { /* runs of them (a snapshot's frames) in one loop */
            for (;;) {
                size_t n = op == 'h' ? 1 : 4;
                if (len - off < n) return HBM_OK;
                hbm_status s = memo_read_back(k, (size_t)le(p + off, (int)n));
                if (s) return s;
                off += n;
                if (off >= len || (p[off] != 'h' && p[off] != 'j')) break;
                op = p[off++];
            }
            break;
        }
        case '}': case ']': case 0x8f: case ')': case 'N': case 0x88: case 0x89: case '(': case 's': case 'a':
        case 'u': case 'e': case 0x90: case 't': case 0x91: case 0x85: case 0x86: case 0x87: case 0x94: break;
        default: return HBM_OK; /* STOP, or an opcode the parse refuses */
        }
        if (w) {
            if (len - off < w) return HBM_OK;
            uint64_t n = le(p + off, (int)w);
            if (n > len - off - w) return HBM_OK;
            skip = w + (size_t)n;
        }
        if (len - off < skip) return HBM_OK;
        off += skip;
    }
    return HBM_OK;
}

static hbm_status memo_reads(pk *k) {
    memo *m = &k->memo;
    hbm_status s = memo_scan(k);
    if (s) return s;
    m->nbits = m->nwords * 64;
    m->rank = hbmi_malloc((m->nwords + 1) * sizeof *m->rank);
    if (!m->rank) return nomem();
    size_t n = 0;
    for (size_t w = 0; w < m->nwords; w++) {
        m->rank[w] = (uint32_t)n;
        n += popcount(m->bits[w]);
    }
    return (m->val = hbmi_calloc(n + 1, sizeof *m->val)) ? HBM_OK : nomem();
}

static uint64_t bytes_hash(uint64_t h, const unsigned char *p, size_t n) {
    h ^= n;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = hbmi_hash64(h ^ w);
    }
    for (; n; p++, n--) h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

/* A memo index the pickle reads back (memo_read_back saw it). */
static inline int read_back(pk *k, size_t idx) {
    return idx < k->memo.nbits ? (int)(k->memo.bits[idx / 64] >> (idx % 64) & 1) : hbmi_map_get(&k->memo.far, idx, NULL);
}

/* The bytes that say what a list holds are its own but for memo stores' indices and FRAME
 * opcodes (numbering and framing differ between equal lists): k->spans, [at, at + len). */
static int span_add(pk *k, size_t from, size_t to) {
    if (to <= from) return 0;
    if (k->nspans == k->spans_cap && hbmi_grow((void **)&k->spans, &k->spans_cap, k->nspans + 1, sizeof *k->spans))
        return -1;
    k->spans[k->nspans].at = from;
    k->spans[k->nspans++].len = to - from;
    return 0;
}

/* A frame dict of the list stack_at reads, item pos, stored under a memo index read back. */
static int own_add(pk *k, size_t idx, size_t pos) {
    if (k->nown == k->own_cap && hbmi_grow((void **)&k->own, &k->own_cap, k->nown + 1, sizeof *k->own)) return -1;
    k->own[k->nown].idx = idx;
    k->own[k->nown++].pos = (uint32_t)pos;
    return 0;
}

/* A memo store at p[*q] inside a list (none is fine): 1 when its index is not read back
 * (*top past it; with from, its index bytes left out of the spans from *from), or when it
 * is and pos, the list's item it stores, is given (kept in k->own); else 0; -1 no memory. */
static int inner_put(pk *k, size_t *q, size_t *top, size_t *from, size_t pos) {
    size_t at = *q, idx = put_at(k, q, *top);
    if (idx == SIZE_MAX) return 1;
    if (read_back(k, idx)) {
        if (pos >= UINT32_MAX) return 0;
        if (own_add(k, idx, pos)) return -1;
    }
    if (idx + 1 > *top) *top = idx + 1;
    if (from && *q - at > 1) {
        if (span_add(k, *from, at + 1)) return -1;
        *from = *q;
    }
    return 1;
}

static int int_at(const pk *k, size_t *q, int64_t *x);

/* One value of a frame dict at p[*q] (a memo read, an int, None, a bool, a str whose memo
 * store is not read back), skipped; its value in *v when v is given (read back, or new in
 * the pool; spans then left alone: from NULL). 1, 0 when it is not one, -1 no memory. */
static int frame_value(pk *k, size_t *q, size_t *top, size_t *from, hbmi_pv **v) {
    const unsigned char *p = k->p;
    size_t len = k->len, w;
    int64_t x;
    switch (p[*q]) {
    case 'h': case 'j':
        w = p[*q] == 'h' ? 1 : 4;
        if (len - *q - 1 < w) return 0;
        if (v && !(*v = memo_get(k, (size_t)le(p + *q + 1, (int)w)))) return 0;
        *q += 1 + w;
        return 1;
    case 'N': case 0x88: case 0x89:
        if (v && !(*v = hbmi_pv_new(k->pool, p[*q] == 'N' ? PV_NONE : PV_BOOL))) return -1;
        if (v) (*v)->i = p[*q] == 0x88;
        *q += 1;
        return 1;
    case 0x8c: case 'X': {
        w = p[*q] == 0x8c ? 1 : 4;
        if (len - *q - 1 < w) return 0;
        size_t n = (size_t)le(p + *q + 1, (int)w), at = *q + 1 + w;
        if (n > len - at) return 0;
        if (v) {
            if (!(*v = hbmi_pv_new(k->pool, PV_STR)) || !((*v)->s = hbmi_malloc(n + 1))) return -1;
            memcpy((*v)->s, p + at, n);
            (*v)->s[n] = 0;
            (*v)->len = n;
        }
        *q = at + n;
        return *q < len ? inner_put(k, q, top, from, SIZE_MAX) : 0;
    }
    default:
        if (!int_at(k, q, &x)) return 0;
        if (v && !(*v = hbmi_pv_new(k->pool, PV_INT))) return -1;
        if (v) (*v)->i = x;
        return 1;
    }
}

/* The item of that list stored under idx (own_add saw it). */
static size_t own_pos(const pk *k, size_t idx) {
    size_t i = k->nown;
    while (i && k->own[i - 1].idx != idx) i--;
    return i ? k->own[i - 1].pos : SIZE_MAX;
}

/* Item pos of that list reads back idx, stored in the list itself: 1 when it is one of its
 * frame dicts (the pair kept in k->rel), 0 when it is not, -1 out of memory. */
static int own_ref(pk *k, size_t idx, size_t pos) {
    size_t at = own_pos(k, idx);
    if (at == SIZE_MAX || pos >= UINT32_MAX) return 0;
    if (k->nrel + 2 > k->rel_cap && hbmi_grow((void **)&k->rel, &k->rel_cap, k->nrel + 2, sizeof *k->rel)) return -1;
    k->rel[k->nrel++] = (uint32_t)pos;
    k->rel[k->nrel++] = (uint32_t)at;
    return 1;
}

/* After EMPTY_LIST at q: its memo store and "( items... e" where each item is a memo
 * reference or, with dicts set, a new dict of such values ("} ( key value ... u": a
 * frame as Python pickles one that is its own object), FRAME opcodes anywhere between:
 * a snapshot's frames, most of its bytes. The kept list equal to it (pyval's stacks) is
 * found again by its bytes (k->spans) without running the opcodes again; the first time
 * its values are decoded (read back or made in the pool). Memo stores inside must not be
 * read back. 1 with *list, *end (after 'e'), *put (its own memo index or SIZE_MAX) and
 * *top past every index stored; 0 when it is not such a list; -1 out of memory. */
static int stack_at(pk *k, size_t q, size_t *top, int dicts, hbmi_pv **list, size_t *end, size_t *put) {
    const unsigned char *p = k->p;
    size_t len = k->len, t = *top;
    *put = put_at(k, &q, t);
    if (*put != SIZE_MAX && *put + 1 > t) t = *put + 1;
    if (q >= len || p[q] != '(') return 0;
    size_t open = q++, from = open, n = 0, t0 = t;
    int m;
    k->nspans = 0;
    k->nown = k->nrel = 0;
    while (q < len && p[q] != 'e') {
        if (p[q] == 'h' || p[q] == 'j') {
            size_t w = p[q] == 'h' ? 2 : 5;
            if (len - q < w) return 0;
            size_t idx = (size_t)le(p + q + 1, (int)w - 1);
            if (idx >= t0 && idx < t) { /* an item stored in this list: by its place, not its index */
                if ((m = own_ref(k, idx, n)) <= 0 || span_add(k, from, q)) return m < 0 ? -1 : 0;
                from = q + w;
            }
            q += w, n++;
        } else if (p[q] == 0x95) { /* FRAME: where a 64 KiB frame ends, no part of the list */
            if (len - q < 9 || span_add(k, from, q)) return 0;
            from = q += 9;
        } else if (p[q] == '}' && dicts) {
            if (++q >= len) return 0;
            if ((m = inner_put(k, &q, &t, &from, n)) <= 0) /* its memo store; read back: a frame met again */
                return m;
            if (q >= len || p[q++] != '(') return 0;
            size_t values = 0;
            while (q < len && p[q] != 'u') {
                unsigned c = p[q]; /* the usual values inline: memo reads, small ints */
                size_t w = c == 'h' || c == 'K' ? 2 : c == 'j' || c == 'J' ? 5 : c == 'M' ? 3 : 0;
                if (w && len - q > w) {
                    q += w, values++;
                } else if (c == 0x95) {
                    if (len - q < 9 || span_add(k, from, q)) return 0;
                    from = q += 9;
                } else if ((m = frame_value(k, &q, &t, &from, NULL)) <= 0) {
                    return m;
                } else {
                    values++;
                }
            }
            if (q++ >= len || values % 2) return 0; /* SETITEMS of key, value pairs */
            n++;
        } else {
            return 0;
        }
    }
    if (!n || q >= len) return 0;
    if (span_add(k, from, ++q)) return -1;
    uint64_t h = 0x9E3779B97F4A7C15ull, at;
    size_t blen = 0;
    for (size_t i = 0; i < k->nspans; i++) {
        h = bytes_hash(h, p + k->spans[i].at, k->spans[i].len);
        blen += k->spans[i].len;
    }
    size_t rlen = k->nrel * sizeof *k->rel; /* its own references follow its bytes */
    h = bytes_hash(h, (const unsigned char *)k->rel, rlen);
    blen += rlen;
    h &= UINT64_MAX >> 1; /* never the map's reserved key */
    *list = NULL;
    if (hbmi_map_get(&k->ref_by_hash, h, &at)) {
        ref_list *r = &k->refs[at - 1];
        if (r->gen == k->memo.gen && r->len == blen) {
            size_t off = 0, i = 0;
            for (; i < k->nspans && !memcmp(r->bytes + off, p + k->spans[i].at, k->spans[i].len); i++)
                off += k->spans[i].len;
            if (i == k->nspans && (!rlen || !memcmp(r->bytes + off, k->rel, rlen))) *list = r->list;
        }
    }
    if (!*list) { /* first time: the list from its values, kept once per content */
        hbmi_pv *l = hbmi_pv_new(k->pool, PV_LIST), *v = NULL;
        if (!l || hbmi_pv_reserve(l, n)) return -1;
        size_t tt = t0;
        for (size_t i = open + 1; p[i] != 'e';) {
            if (p[i] == 0x95) {
                i += 9;
            } else if (p[i] == '}') {
                hbmi_pv *d = hbmi_pv_new(k->pool, PV_DICT);
                if (!d || hbmi_pv_push(l, d)) return -1;
                i++;
                size_t idx = put_at(k, &i, tt); /* its memo store */
                if (idx != SIZE_MAX && idx + 1 > tt) tt = idx + 1;
                if (idx != SIZE_MAX && read_back(k, idx)) d->keep = 1; /* in the list twice: never given back */
                for (i++; p[i] != 'u';) {
                    if (p[i] == 0x95) {
                        i += 9;
                        continue;
                    }
                    if ((m = frame_value(k, &i, &tt, NULL, &v)) <= 0) return m;
                    if (hbmi_pv_push(d, v)) return -1;
                }
                i++;
            } else {
                size_t w = p[i] == 'h' ? 1 : p[i] == 'j' ? 4 : 0, idx = w ? (size_t)le(p + i + 1, (int)w) : 0, item;
                if (w && idx >= t0 && (item = own_pos(k, idx)) < l->n) { /* an earlier item of this list */
                    v = l->items[item];
                    i += 1 + w;
                } else if ((m = frame_value(k, &i, &tt, NULL, &v)) <= 0) {
                    return m; /* 0: an index never stored */
                }
                l->items[l->n++] = v;
            }
        }
        if (!(*list = hbmi_pv_keep_stack(k->pool, l))) return -1;
        ref_list r = {.bytes = hbmi_malloc(blen), .len = blen, .gen = k->memo.gen, .list = *list};
        if (!r.bytes || (k->nrefs == k->refs_cap && hbmi_grow((void **)&k->refs, &k->refs_cap, k->nrefs + 1, sizeof *k->refs)))
            return hbmi_free(r.bytes), -1;
        size_t off = 0;
        for (size_t i = 0; i < k->nspans; off += k->spans[i++].len)
            memcpy(r.bytes + off, p + k->spans[i].at, k->spans[i].len);
        if (rlen) memcpy(r.bytes + off, k->rel, rlen);
        k->refs[k->nrefs++] = r;
        if (hbmi_map_put(&k->ref_by_hash, h, k->nrefs)) return -1;
    }
    *end = q;
    *top = t;
    return 1;
}

/* The frame dicts of the list stack_at read that the pickle reads back, stored in the memo
 * once the caller takes the list (the memo's top must not move before). */
static hbm_status own_store(pk *k, const hbmi_pv *list) {
    hbm_status s = HBM_OK;
    for (size_t i = 0; i < k->nown && !s; i++) s = memo_store(k, k->own[i].idx, list->items[k->own[i].pos]);
    return s;
}

/* EMPTY_LIST at k->off - 1 that is a list of memo references (stack_at): pushed as the
 * kept list, its opcodes skipped. 0 when it is not one. */
static int ref_list_fast(pk *k, hbm_status *st) {
    hbmi_pv *list;
    size_t end, put, top = k->memo_top;
    int m = stack_at(k, k->off, &top, 0, &list, &end, &put);
    if (m <= 0) return m < 0 ? (*st = nomem(), 1) : 0;
    if ((*st = push(k, list)) || (put != SIZE_MAX && (*st = memo_store(k, put, list))) || (*st = own_store(k, list)))
        return 1;
    k->off = end;
    return 1;
}

static int field_of(pk *k, const hbmi_pv *key) {
    static const char *const names[F_N] = {"action", "addr", "size", "stream", "time_us", "frames", "device_free"};
    for (int f = 0; f < F_N; f++)
        if (k->fkey[f] == key) return f;
    if (key->type != PV_STR) return -1;
    for (int f = 0; f < F_N; f++)
        if (key->len == strlen(names[f]) && !memcmp(key->s, names[f], key->len)) return k->fkey[f] = key, f;
    return F_OTHER; /* a key the importer does not read ("compile_context", ...) */
}

/* A memo read at p[*q]: its value, else NULL (*q after it). */
static hbmi_pv *read_at(pk *k, size_t *q) {
    const unsigned char *p = k->p;
    size_t w = p[*q] == 'h' ? 1 : p[*q] == 'j' ? 4 : 0;
    if (!w || k->len - *q - 1 < w) return NULL;
    size_t idx = (size_t)le(p + *q + 1, (int)w);
    *q += 1 + w;
    return memo_get(k, idx);
}

/* An int at p[*q] (BININT1, BININT2, BININT, LONG1 up to 8 bytes); 0 if not one. */
static int int_at(const pk *k, size_t *q, int64_t *x) {
    const unsigned char *p = k->p + *q;
    size_t left = k->len - *q;
    switch (p[0]) {
    case 'K': if (left < 2) return 0; *x = p[1]; *q += 2; return 1;
    case 'M': if (left < 3) return 0; *x = (int64_t)le(p + 1, 2); *q += 3; return 1;
    case 'J': if (left < 5) return 0; *x = (int32_t)(uint32_t)le(p + 1, 4); *q += 5; return 1;
    case 0x8a: {
        if (left < 2 || p[1] > 8 || left < 2u + p[1]) return 0;
        *x = long_value(p + 2, p[1]);
        *q += 2u + p[1];
        return 1;
    }
    default: return 0;
    }
}

/* EMPTY_DICT at k->off - 1 that is a snapshot's trace entry as PyTorch pickles it: its
 * memo store, then "( key value ... u" with keys read back from the memo (action, addr,
 * size, stream, time_us, frames), ints, and frames as a list of references or a list read
 * back. Decoded straight into its event (pool->staged) without building the dict; anything
 * else (another key, a size < 0, a value stored for reading back) takes the usual path. */
static int entry_fast(pk *k, hbm_status *st) {
    const unsigned char *p = k->p;
    size_t q = k->off, len = k->len, top = k->memo_top;
    size_t put = put_at(k, &q, top), fput = SIZE_MAX;
    int fput_own = 0; /* frames read by stack_at: its k->own to store */
    if (put != SIZE_MAX) {
        if (memo_slot(&k->memo, put) || (put >= k->memo.nbits && hbmi_map_get(&k->memo.far, put, NULL)))
            return 0; /* read back later: the usual path */
        if (put + 1 > top) top = put + 1;
    }
    if (q >= len || p[q++] != '(') return 0;
    hbm_trace_event r = {.time_ns = UINT64_MAX}; /* time_us -1: none */
    hbmi_pv *frames = NULL;
    const hbmi_pv *actv = NULL, *xp[8]; /* the action; other keys' (key, value) pairs, kept for the export */
    hbmi_pv xtmp[4];                   /* their values written inline */
    size_t nxp = 0;
    unsigned seen = 0;
    while (q < len && p[q] != 'u') {
        hbmi_pv *key = read_at(k, &q), *v;
        int f = key ? field_of(k, key) : -1;
        if (f < 0 || (f < F_OTHER && (seen >> f & 1)) || q >= len) return 0;
        seen |= 1u << f;
        int64_t x = 0;
        if (f == F_OTHER) { /* a plain value not stored for reading back: kept for the export */
            hbmi_pv *t = nxp < 8 ? &xtmp[nxp / 2] : NULL, *val = t;
            if (t) memset(t, 0, sizeof *t);
            if (p[q] == 'h' || p[q] == 'j') {
                if (!(val = read_at(k, &q))) return 0;
            } else if (p[q] == 'N' || p[q] == 0x88 || p[q] == 0x89) {
                if (t) t->type = p[q] == 'N' ? PV_NONE : PV_BOOL, t->i = p[q] == 0x88;
                q++;
            } else if (p[q] == 0x8c || p[q] == 'X') {
                size_t w = p[q] == 0x8c ? 1 : 4;
                if (len - q - 1 < w) return 0;
                size_t n = (size_t)le(p + q + 1, (int)w);
                if (n > len - q - 1 - w) return 0;
                if (t) t->type = PV_STR, t->s = (char *)(p + q + 1 + w), t->len = n;
                q += 1 + w + n;
                if (put_at(k, &q, top) != SIZE_MAX) return 0;
            } else if (!int_at(k, &q, &x)) {
                return 0;
            } else if (t) {
                t->type = PV_INT, t->i = x;
            }
            if (nxp < 8) xp[nxp++] = key, xp[nxp++] = val;
            continue;
        }
        if (f == F_ACTION) {
            if (!(v = read_at(k, &q)) || v->type != PV_STR) return 0;
            r.kind = hbmi_pv_action_kind(k->pool, v);
            actv = v;
        } else if (f == F_FRAMES) {
            if (p[q] == ']') {
                size_t end;
                int m = stack_at(k, q + 1, &top, 1, &frames, &end, &fput);
                if (m <= 0) return m < 0 ? (*st = nomem(), 1) : 0;
                q = end;
                fput_own = 1;
            } else if (!(frames = read_at(k, &q)) || frames->type != PV_LIST) {
                return 0;
            }
        } else if (!int_at(k, &q, &x) || (f == F_SIZE && x < 0)) {
            return 0;
        }
        if (f == F_ADDR) r.addr = (uint64_t)x;
        if (f == F_SIZE) r.size = (uint64_t)x;
        if (f == F_STREAM) r.stream = (uint64_t)x;
        if (f == F_TIME) r.time_ns = (uint64_t)x;
        if (f == F_DFREE) r.requested = (uint64_t)x;
    }
    if (q >= len || !(seen >> F_ACTION & 1)) return 0;
    if (nxp && (r.thread = hbmi_pv_extra(k->pool, xp, nxp / 2)) == UINT32_MAX) return *st = nomem(), 1;
    if (!r.kind) r.requested = hbmi_pv_other_action(k->pool, actv, seen >> F_FRAMES & 1);
    if (frames && frames->n) {
        hbmi_pv *kept = hbmi_pv_keep_stack_index(k->pool, frames, &r.backtrace);
        if (!kept) return *st = nomem(), 1;
    }
    hbmi_pv *e = hbmi_pv_staged(k->pool, &r);
    if (!e) return *st = nomem(), 1;
    if ((*st = push(k, e))) return 1;
    if (put != SIZE_MAX && (*st = memo_store(k, put, e))) return 1;
    if (fput != SIZE_MAX && (*st = memo_store(k, fput, frames))) return 1;
    if (fput_own && (*st = own_store(k, frames))) return 1;
    if (top > k->memo_top) k->memo_top = top; /* past the memo stores inside its frames */
    k->off = q + 1; /* after SETITEMS */
    return 1;
}

static hbm_status step(pk *k, int *done) {
    size_t at = k->off;
    unsigned op = k->p[k->off++];
    char msg[192];
    switch (op) {
    case 0x80: /* PROTO */
        if (!need(k, 1)) return ends_early(k);
        if (k->p[k->off] < 2 || k->p[k->off] > 5) {
            snprintf(msg, sizeof msg, "pickle protocol %u (expected 2 to 4)", k->p[k->off]);
            return perr(k, at, msg);
        }
        k->off++;
        return HBM_OK;
    case 0x95: /* FRAME: just a length hint */
        if (!need(k, 8)) return ends_early(k);
        k->off += 8;
        return HBM_OK;
    case '}': {
        hbm_status st = HBM_OK;
        if (k->pool->events && entry_fast(k, &st)) return st;
        return push(k, hbmi_pv_new(k->pool, PV_DICT));
    }
    case ']': {
        hbm_status st = HBM_OK;
        if (k->pool->events && ref_list_fast(k, &st)) return st;
        return push(k, hbmi_pv_new(k->pool, PV_LIST));
    }
    case 0x8f: return push(k, hbmi_pv_new(k->pool, PV_LIST));
    case ')': return push(k, hbmi_pv_new(k->pool, PV_TUPLE));
    case 'N': return push(k, hbmi_pv_new(k->pool, PV_NONE));
    case 0x88: case 0x89: {
        hbmi_pv *v = hbmi_pv_new(k->pool, PV_BOOL);
        if (v) v->i = op == 0x88;
        return push(k, v);
    }
    case '(':
        if (hbmi_grow((void **)&k->marks, &k->mcap, k->mn + 1, sizeof *k->marks)) return nomem();
        k->marks[k->mn++] = k->sn;
        return HBM_OK;
    case 'J':
        if (!need(k, 4)) return ends_early(k);
        k->off += 4;
        return new_int(k, (int32_t)(uint32_t)le(k->p + at + 1, 4));
    case 'K':
        if (!need(k, 1)) return ends_early(k);
        return new_int(k, k->p[k->off++]);
    case 'M':
        if (!need(k, 2)) return ends_early(k);
        k->off += 2;
        return new_int(k, (int64_t)le(k->p + at + 1, 2));
    case 0x8a: case 0x8b: { /* LONG1 / LONG4: little-endian two's complement */
        size_t w = op == 0x8a ? 1 : 4;
        if (!need(k, w)) return ends_early(k);
        uint64_t n = le(k->p + k->off, (int)w);
        k->off += w;
        if (!need(k, n)) return ends_early(k);
        const unsigned char *b = k->p + k->off;
        k->off += n;
        if (n <= 8 || (n == 9 && !b[8])) return new_int(k, long_value(b, (size_t)n));
        /* wider than 64 bits (2^70): kept as a float (Python's float(x)), so that a size or
         * an address of that value is out of range, an error that names its event */
        double f = 0;
        for (size_t i = (size_t)n; i-- > 0;) f = f * 256 + b[i];
        if (b[n - 1] & 0x80) f -= ldexp(1, (int)(n < 1024 ? 8 * n : 8192));
        hbmi_pv *v = hbmi_pv_new(k->pool, PV_FLOAT);
        if (v) v->f = f;
        return push(k, v);
    }
    case 'G': {
        if (!need(k, 8)) return ends_early(k);
        uint64_t b = 0;
        for (int i = 0; i < 8; i++) b = (b << 8) | k->p[k->off + i];
        k->off += 8;
        hbmi_pv *v = hbmi_pv_new(k->pool, PV_FLOAT);
        if (v) memcpy(&v->f, &b, 8);
        return push(k, v);
    }
    case 'X': case 'T': case 'B':
        if (!need(k, 4)) return ends_early(k);
        k->off += 4;
        return new_str(k, op == 'B' ? PV_BYTES : PV_STR, (size_t)le(k->p + at + 1, 4), at);
    case 0x8c: case 'U': case 'C':
        if (!need(k, 1)) return ends_early(k);
        k->off++;
        return new_str(k, op == 'C' ? PV_BYTES : PV_STR, k->p[at + 1], at);
    case 0x8d: case 0x8e: {
        if (!need(k, 8)) return ends_early(k);
        uint64_t n = le(k->p + k->off, 8);
        k->off += 8;
        if (n > k->len) return ends_early(k);
        return new_str(k, op == 0x8e ? PV_BYTES : PV_STR, (size_t)n, at);
    }
    case 0x94: return memo_put(k, k->memo_top, at);
    case 'q':
        if (!need(k, 1)) return ends_early(k);
        return memo_put(k, k->p[k->off++], at);
    case 'r':
        if (!need(k, 4)) return ends_early(k);
        k->off += 4;
        return memo_put(k, (size_t)le(k->p + at + 1, 4), at);
    case 'h': case 'j': {
        size_t w = op == 'h' ? 1 : 4;
        if (!need(k, w)) return ends_early(k);
        size_t idx = (size_t)le(k->p + k->off, (int)w);
        k->off += w;
        hbmi_pv *v = memo_get(k, idx);
        if (!v) return perr(k, at, "memo get of an index never stored");
        return push(k, v);
    }
    case 's': {
        if (k->sn < 3 || k->stack[k->sn - 3]->type != PV_DICT) return perr(k, at, "SETITEM without a dict, key and value");
        hbmi_pv *d = k->stack[k->sn - 3];
        if (hbmi_pv_push(d, k->stack[k->sn - 2]) || hbmi_pv_push(d, k->stack[k->sn - 1])) return nomem();
        k->sn -= 2;
        return HBM_OK;
    }
    case 'a': {
        if (k->sn < 2 || k->stack[k->sn - 2]->type != PV_LIST) return perr(k, at, "APPEND without a list and a value");
        if (hbmi_pv_list_add(k->pool, k->stack[k->sn - 2], k->stack[k->sn - 1])) return nomem();
        k->sn--;
        return HBM_OK;
    }
    case 'u': case 'e': case 0x90: {
        size_t from = 0;
        hbm_status s = pop_mark(k, at, &from);
        if (s) return s;
        if (from == 0) return perr(k, at, "SETITEMS/APPENDS without a container below the MARK");
        hbmi_pv *c = k->stack[from - 1];
        if (op == 'u' ? c->type != PV_DICT || (k->sn - from) % 2 : c->type != PV_LIST)
            return perr(k, at, op == 'u' ? "SETITEMS needs a dict and key/value pairs" : "APPENDS needs a list");
        if (op == 'u' && hbmi_pv_reserve(c, k->sn - from)) return nomem();
        if (k->pool->in && k->off >= k->pool->in->next) hbmi_input_progress(k->pool->in, k->off);
        for (size_t i = from; i < k->sn; i++)
            if (op == 'u' ? hbmi_pv_push(c, k->stack[i]) : hbmi_pv_list_add(k->pool, c, k->stack[i])) return nomem();
        k->sn = from;
        return HBM_OK;
    }
    case 't': case 0x91: {
        size_t from = 0;
        hbm_status s = pop_mark(k, at, &from);
        if (s) return s;
        hbmi_pv *v = hbmi_pv_new(k->pool, op == 't' ? PV_TUPLE : PV_LIST);
        if (!v) return nomem();
        for (size_t i = from; i < k->sn; i++)
            if (hbmi_pv_push(v, k->stack[i])) return nomem();
        k->sn = from;
        return push(k, v);
    }
    case 0x85: case 0x86: case 0x87: {
        size_t n = op - 0x84;
        if (k->sn < n) return perr(k, at, "TUPLEn with too few stack items");
        hbmi_pv *v = hbmi_pv_new(k->pool, PV_TUPLE);
        if (!v) return nomem();
        for (size_t i = k->sn - n; i < k->sn; i++)
            if (hbmi_pv_push(v, k->stack[i])) return nomem();
        k->sn -= n;
        return push(k, v);
    }
    case '.':
        *done = 1;
        return HBM_OK;
    default:
        snprintf(msg, sizeof msg,
                 "unsupported opcode 0x%02x ('%c'): only plain data (dict, list, tuple, str, int, float, ...) is read",
                 op, op >= 32 && op < 127 ? (int)op : '?');
        return perr(k, at, msg);
    }
}

hbm_status hbmi_pickle_parse(const unsigned char *data, size_t len, const char *name, hbmi_pvpool *pool,
                             hbmi_pv **out) {
    pk k = {.p = data, .len = len, .name = name ? name : "pickle", .pool = pool};
    hbm_status s = HBM_OK;
    int done = 0;
    hbmi_map_init(&k.memo.far);
    hbmi_map_init(&k.ref_by_hash);
    if (!len || data[0] != 0x80) s = perr(&k, 0, "expected PROTO (0x80): not a pickle of protocol 2 or later");
    if (!s) s = memo_reads(&k);
    while (!s && !done) {
        if (k.off >= len) {
            s = ends_early(&k);
            break;
        }
        s = step(&k, &done);
    }
    if (!s && k.sn != 1) s = perr(&k, k.off - 1, "STOP with other than one value on the stack");
    if (!s) *out = k.stack[0];
    hbmi_free(k.stack);
    hbmi_free(k.marks);
    memo_free(&k.memo);
    for (size_t i = 0; i < k.nrefs; i++) hbmi_free(k.refs[i].bytes);
    hbmi_free(k.refs);
    hbmi_free(k.spans);
    hbmi_free(k.own);
    hbmi_free(k.rel);
    hbmi_map_destroy(&k.ref_by_hash);
    return s;
}
