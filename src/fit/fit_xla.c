/* fit_xla.c - the baseline: XLA's HloRematerialization with its default algorithm, "always
 * remat" (xla/hlo/transforms/simplifiers/hlo_rematerialization.cc), on fit's model.
 *
 * XLA walks the schedule; wherever the memory its tracker counts (every buffer of the
 * computation that is not an output: parameters and temps) is over the limit, it takes the
 * cheapest candidate among the values already defined that still have uses ahead and may be
 * cloned, and recomputes it before its next use; the cost is limit / bytes freed (a candidate
 * none of whose users has run yet moves for free), the bytes freed are its size less the
 * operands the clone brings back to life. It repeats until the point is under the limit or no
 * candidate is left, then goes on. Its limit is GetSchedulerMemoryLimit's (device memory less
 * parameters and outputs plus aliased, times xla_gpu_memory_limit_slop_factor 95 %) less the
 * module's output size, as HloRematerialization::Run subtracts it. The walk is over the
 * flattened schedule: inside a while body or a called computation the caller's values idle
 * across the call are taken first (XLA rematerializes the caller at the call site, with the
 * callee's peak added, and recurses into the callee with the limit less the caller's usage
 * only when that is not enough). Candidates are values read directly or through bitcasts and
 * get-tuple-elements (XLA's supported indirect users; a multi-output fusion is cloned whole);
 * values read through a tuple or a while (loop-carried) and outputs are not. When the walk ends above
 * the limit XLA warns "Can't reduce memory use below ...", written here the same way.
 *
 * That walk over fit's candidates is the GPU baseline's. The TPU baseline (rule->lists) is
 * XLA's walk as written, on per-computation instruction lists that clones join (below: a
 * clone before the earliest unplaced reader of the value or of its operands, cloned again
 * later, a callee walked with its own limit); its clones are kept in mo->xc and written in
 * rounds by hbmi_fit_xla_write. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit/fit_internal.h"

void hbmi_fit_xla_bytes(int64_t b, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (b < 0) {
        snprintf(buf, cap, "-%lldB", (long long)-b); /* XLA prints negatives as raw bytes */
        return;
    }
    if (b < 1024) {
        snprintf(buf, cap, "%lldB", (long long)b);
        return;
    }
    double v = (double)b;
    int u = 0;
    while (v >= 1024 && u < 5) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, "%.2f%s", v, units[u]);
}

static void add(int64_t *live, uint32_t n, uint32_t lo, uint32_t hi, int64_t d) {
    for (uint32_t t = lo; t <= hi && t < n; t++) live[t] += d;
}

/* The bytes an operand of c's clone brings back at t because the baseline already
 * rematerialized that operand over a span holding t: XLA's tracker charges an operand buffer
 * that is not live at the current point (MemoryReducedIfRematerialized), and a value whose
 * later uses went to its own clone is not live there. */
static int64_t remat_operands(const hbmi_fit_model *mo, const hbmi_fit_cand *c, const uint32_t *picks,
                              uint32_t np, uint32_t t) {
    const hbmi_comp *cp = &mo->m->comps[c->edit.comp];
    const hbmi_instr *in = &cp->ins[c->edit.ins];
    int64_t back = 0;
    for (uint32_t k = 0; k < in->n_ops; k++) {
        int dup = 0;
        for (uint32_t j = 0; j < k; j++) dup |= in->ops[j] == in->ops[k];
        if (dup) continue;
        for (uint32_t q = 0; q < np; q++) {
            const hbmi_fit_cand *o = &mo->cand[picks[q]];
            if (o->edit.comp == c->edit.comp && o->edit.ins == in->ops[k] && o->lo <= t && t <= o->hi) {
                back += (int64_t)o->bytes;
                break;
            }
        }
    }
    return back;
}

/* The earliest time of an instruction that names candidate k's value among its
 * control-predecessors (UINT32_MAX when none). XLA never rematerializes an instruction
 * one of whose control successors is already placed (RematerializeInstructions checks it:
 * "we never remat an operation with control successor already placed"); the reader keeps
 * no control edges, so they are read from the instruction's line of the text. */
static void control_successors(const hbmi_fit_model *mo, uint32_t *ctl) {
    const hbm_hlo_module *m = mo->m;
    static const char key[] = "control-predecessors={";
    for (uint32_t k = 0; k < mo->n_cand; k++) ctl[k] = UINT32_MAX;
    if (!m->text) return;
    for (uint32_t k = 0; k < mo->n_cand; k++) {
        const hbmi_fit_cand *c = &mo->cand[k];
        if (k && c->edit.comp == mo->cand[k - 1].edit.comp && c->edit.ins == mo->cand[k - 1].edit.ins) {
            ctl[k] = ctl[k - 1];
            continue;
        }
        const hbmi_comp *cp = &m->comps[c->edit.comp];
        const hbmi_str *nm = &cp->ins[c->edit.ins].name;
        for (uint32_t i = 0; i < cp->n; i++) {
            const hbmi_instr *in = &cp->ins[i];
            if (in->synthetic || in->time < 0 || in->off >= m->len) continue;
            const char *a = m->text + in->off, *e = memchr(a, '\n', m->len - in->off);
            if (!e) e = m->text + m->len;
            const char *f = NULL;
            for (const char *q = a; q + sizeof key - 1 <= e; q++)
                if (!memcmp(q, key, sizeof key - 1)) {
                    f = q + sizeof key - 1;
                    break;
                }
            if (!f) continue;
            while (f < e && *f != '}') {
                while (f < e && (*f == ' ' || *f == ',' || *f == '%')) f++;
                const char *b = f;
                while (f < e && *f != ',' && *f != '}' && *f != ' ') f++;
                if ((uint32_t)(f - b) == nm->n && !memcmp(b, nm->p, nm->n) && (uint64_t)in->time < ctl[k])
                    ctl[k] = (uint32_t)in->time;
            }
        }
    }
}

static void xla_lists(hbmi_fit_model *mo, int64_t limit, const hbmi_fit_xla_rule *rule, int64_t *before,
                      int64_t *after);

/* XLA's warning when the walk ends above the limit; the figures as the rule shows them. */
static void xla_result(const hbmi_fit_xla_rule *rule, int64_t limit, int64_t before, int64_t after, char *msg,
                       size_t cap) {
    if (after > limit && msg && cap) {
        /* the TPU rule prints as Run does: the limit it was given and the peaks with the
         * module's outputs added back */
        int64_t add = rule->shown_outputs;
        char a[32], b[32], c[32];
        hbmi_fit_xla_bytes(limit + add, a, sizeof a);
        hbmi_fit_xla_bytes(after + add, b, sizeof b);
        hbmi_fit_xla_bytes(before + add, c, sizeof c);
        snprintf(msg, cap,
                 "Can't reduce memory use below %s (%lld bytes) by rematerialization; only reduced to %s "
                 "(%lld bytes), down from %s (%lld bytes) originally",
                 a, (long long)(limit + add), b, (long long)(after + add), c, (long long)(before + add));
    }
    if (rule->before) *rule->before = before + rule->shown_outputs;
    if (rule->after) *rule->after = after + rule->shown_outputs;
}

void hbmi_fit_xla(hbmi_fit_model *mo, int64_t limit, const hbmi_fit_xla_rule *rule, char *msg, size_t cap) {
    uint32_t n = mo->n;
    if (msg && cap) msg[0] = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) mo->cand[k].xla_chosen = 0;
    if (rule->lists) {
        int64_t before, after;
        xla_lists(mo, limit, rule, &before, &after);
        xla_result(rule, limit, before, after, msg, cap);
        return;
    }
    int64_t *live = hbmi_malloc(sizeof *live * (n + 1));
    uint8_t *gused = NULL;
    uint32_t *groups = hbmi_malloc(sizeof *groups * (mo->n_cand + 1));
    uint32_t *picks = hbmi_malloc(sizeof *picks * (mo->n_cand + 1));
    uint32_t *ctl = hbmi_malloc(sizeof *ctl * (mo->n_cand + 1));
    uint32_t np = 0;
    if (!live || !groups || !picks || !ctl) goto out;
    control_successors(mo, ctl);
    int64_t before = 0;
    for (uint32_t t = 0; t < n; t++) {
        live[t] = (rule->count_args ? (int64_t)mo->args : 0) + mo->live_xla[t];
        if (live[t] > before) before = live[t];
    }
    /* one clone per value; a value's candidates are adjacent (fit_model.c makes them so) */
    uint32_t ng = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++)
        groups[k] = k && mo->cand[k].group == mo->cand[k - 1].group ? groups[k - 1] : ng++;
    gused = hbmi_calloc(ng + 1, 1);
    if (!gused) goto out;
    for (uint32_t t = 0; t < n; t++) {
        while (live[t] > limit) {
            double best = 0;
            uint32_t pick = UINT32_MAX;
            for (uint32_t k = 0; k < mo->n_cand; k++) {
                const hbmi_fit_cand *c = &mo->cand[k];
                if (c->edit.kind != HBM_FIT_REMATERIALIZE || c->lo > t || c->hi < t || gused[groups[k]]) continue;
                if (c->bytes < rule->min_remat_bytes) continue; /* PromoteNodesToSkip: below min_remat_size */
                if (ctl[k] <= t) continue; /* a control successor already placed */
                int64_t freed = (int64_t)c->bytes;
                for (uint32_t j = 0; j < c->n_pen; j++)
                    if (c->pen[j].lo <= t && t <= c->pen[j].hi) freed -= (int64_t)c->pen[j].bytes;
                if (freed > 0 && np) freed -= remat_operands(mo, c, picks, np, t);
                if (freed <= 0) continue;
                double cost = c->edit.drop ? 0 : (double)limit / (double)freed;
                /* the caller first: XLA rematerializes in a computation at its call site and
                 * descends into the callee only when the caller has nothing left */
                if (pick == UINT32_MAX || c->depth < mo->cand[pick].depth ||
                    (c->depth == mo->cand[pick].depth && cost < best)) {
                    best = cost;
                    pick = k;
                }
            }
            if (pick == UINT32_MAX) break;
            hbmi_fit_cand *c = &mo->cand[pick];
            c->xla_chosen = 1;
            gused[groups[pick]] = 1;
            picks[np++] = pick;
            add(live, n, c->lo, c->hi, -(int64_t)c->bytes);
            for (uint32_t j = 0; j < c->n_pen; j++) add(live, n, c->pen[j].lo, c->pen[j].hi, (int64_t)c->pen[j].bytes);
        }
    }
    int64_t after = 0;
    for (uint32_t t = 0; t < n; t++)
        if (live[t] > after) after = live[t];
    xla_result(rule, limit, before, after, msg, cap);
out:
    hbmi_free(ctl);
    hbmi_free(picks);
    hbmi_free(live);
    hbmi_free(gused);
    hbmi_free(groups);
}

/* --- XLA's walk on the instruction lists -------------------------------------------------------
 * RematerializeComputation as it is written: per computation, an instruction list that clones
 * join; a tracker of the buffers each item defines and uses (TuplePointsToAnalysis: a
 * bitcast or get-tuple-element defines none, a tuple only its index table); at every item
 * that allocates, while the memory plus the called computations' peaks is over the limit, the
 * placed item of least cost limit / MemoryReducedIfRematerialized (0: none of its users
 * placed, a move; the first in list order on a tie) is cloned; the clone takes every unplaced
 * use, and goes before the earliest unplaced user of the value or of any of its operands; it
 * is an item like any other, cloned again when it is live over a later point. At a while or a
 * call still over the limit, the callee is walked with the limit less the caller's usage. */

typedef struct u32v {
    uint32_t n, cap;
    uint32_t *p;
} u32v;

static int vpush(u32v *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t cap = v->cap;
        if (hbmi_grow((void **)&v->p, &cap, (size_t)v->n + 1, sizeof *v->p)) return -1;
        v->cap = (uint32_t)cap;
    }
    v->p[v->n++] = x;
    return 0;
}
static int vhas(const u32v *v, uint32_t x) {
    for (uint32_t i = 0; i < v->n; i++)
        if (v->p[i] == x) return 1;
    return 0;
}
static int vadd(u32v *v, uint32_t x) { return vhas(v, x) ? 0 : vpush(v, x); }
static int vcopy(u32v *d, const u32v *s) {
    for (uint32_t i = 0; i < s->n; i++)
        if (vpush(d, s->p[i])) return -1;
    return 0;
}

#define NONE UINT32_MAX

typedef struct xitem {
    uint32_t ins;     /* the instruction it is or clones (NONE: a get-tuple-element or bitcast of a clone) */
    uint32_t src;     /* the item it clones, NONE for an instruction of the module */
    uint32_t prev, next;
    uint32_t rec;     /* its record in mo->xc (clones) */
    int64_t gte;      /* a get-tuple-element's index */
    uint8_t placed, deny, alias, gen, killed;
    u32v ops, used, defd;
} xitem;

typedef struct xbuf {
    uint32_t def;
    int64_t size;     /* AllocatedSize: 0 for parameters, outputs, constants */
    int32_t index;    /* -1 the top, k element k of a flat tuple, -2 deeper */
    uint8_t live_out, indirect;
    int64_t unfinished;
    u32v users, aliases;
} xbuf;

typedef struct xctx {
    hbmi_fit_model *mo;
    const hbm_hlo_module *m;
    const hbmi_df *df;
    uint64_t min_bytes;
    int64_t entry_base; /* the entry's tracker starts here (the GPU rule counts the arguments) */
    int64_t *peak;      /* per computation: its peak as the tracker counts it */
    uint8_t *state;     /* per computation: 1 peak known, 2 rematerialized */
    uint32_t cap_xc, cap_xrd;
    hbm_status err;
} xctx;

typedef struct xwalk {
    xctx *x;
    uint32_t ci;
    const hbmi_comp *c;
    xitem *it;
    uint32_t n_it, cap_it;
    xbuf *bf;
    uint32_t n_bf, cap_bf;
    uint32_t first, cur;
    int64_t mem, limit;
    u32v moves;   /* remat_move_instructions */
    u32v *succ;   /* per instruction: its control successors */
} xwalk;

static uint32_t new_item(xwalk *w) {
    if (w->n_it == w->cap_it) {
        size_t cap = w->cap_it;
        if (hbmi_grow((void **)&w->it, &cap, (size_t)w->n_it + 1, sizeof *w->it)) return NONE;
        w->cap_it = (uint32_t)cap;
    }
    memset(&w->it[w->n_it], 0, sizeof *w->it);
    w->it[w->n_it].ins = w->it[w->n_it].src = w->it[w->n_it].rec = NONE;
    w->it[w->n_it].prev = w->it[w->n_it].next = NONE;
    return w->n_it++;
}

static uint32_t new_buf(xwalk *w) {
    if (w->n_bf == w->cap_bf) {
        size_t cap = w->cap_bf;
        if (hbmi_grow((void **)&w->bf, &cap, (size_t)w->n_bf + 1, sizeof *w->bf)) return NONE;
        w->cap_bf = (uint32_t)cap;
    }
    memset(&w->bf[w->n_bf], 0, sizeof *w->bf);
    return w->n_bf++;
}

static void walk_free(xwalk *w) {
    for (uint32_t i = 0; i < w->n_it; i++) {
        hbmi_free(w->it[i].ops.p);
        hbmi_free(w->it[i].used.p);
        hbmi_free(w->it[i].defd.p);
    }
    for (uint32_t b = 0; b < w->n_bf; b++) {
        hbmi_free(w->bf[b].users.p);
        hbmi_free(w->bf[b].aliases.p);
    }
    for (uint32_t i = 0; w->succ && i < w->c->n; i++) hbmi_free(w->succ[i].p);
    hbmi_free(w->succ);
    hbmi_free(w->moves.p);
    hbmi_free(w->it);
    hbmi_free(w->bf);
}

/* The users and aliases of buffer b seen from item a at shape node an (GetUsers: the users of
 * every alias; a get-tuple-element reads the table only and is an alias of its element; a
 * bitcast reads and aliases; a tuple or a while holding it makes its uses indirect). */
static int alias_walk(xwalk *w, uint32_t b, uint32_t a, uint32_t an, int depth) {
    const hbmi_instr *ai = &w->c->ins[a];
    if (vadd(&w->bf[b].aliases, a)) return -1;
    if (ai->is_root) w->bf[b].live_out = 1;
    if (depth > 16) return 0;
    for (uint32_t k = 0; k < ai->n_users; k++) {
        uint32_t u = ai->users[k];
        const hbmi_instr *ui = &w->c->ins[u];
        if (ui->op == HOP_GTE || ui->synthetic) {
            if (an == 0) {
                if (vadd(&w->bf[b].users, u)) return -1;
            } else if (ai->shape->prim == HBMI_PRIM_TUPLE && ui->gte_index >= 0 &&
                       (uint64_t)ui->gte_index < ai->shape->n) {
                uint32_t cs = hbmi_shape_child(ai->shape, (uint32_t)ui->gte_index);
                if (an >= cs && an < cs + hbmi_shape_node(ai->shape, cs)->nodes &&
                    alias_walk(w, b, u, an - cs, depth + 1))
                    return -1;
            }
            continue;
        }
        if (vadd(&w->bf[b].users, u)) return -1;
        if (ui->op == HOP_BITCAST) {
            if (alias_walk(w, b, u, an, depth + 1)) return -1;
        } else if (ui->op == HOP_TUPLE) {
            for (uint32_t j = 0; j < ui->n_ops; j++)
                if (ui->ops[j] == a) {
                    if (ui->n_users) w->bf[b].indirect = 1;
                    if (alias_walk(w, b, u, hbmi_shape_child(ui->shape, j) + an, depth + 1)) return -1;
                }
        } else if (ui->op == HOP_WHILE) {
            w->bf[b].indirect = 1;
            if (alias_walk(w, b, u, an, depth + 1)) return -1;
        }
    }
    return 0;
}

/* The control successors of each instruction, read from the lines naming it in
 * control-predecessors={...} (the reader keeps no control edges). */
static int read_successors(xwalk *w) {
    const hbm_hlo_module *m = w->x->m;
    static const char key[] = "control-predecessors={";
    w->succ = hbmi_calloc(w->c->n + 1, sizeof *w->succ);
    if (!w->succ) return -1;
    if (!m->text) return 0;
    for (uint32_t i = 0; i < w->c->n; i++) {
        const hbmi_instr *in = &w->c->ins[i];
        if (in->synthetic || in->off >= m->len) continue;
        const char *a = m->text + in->off, *e = memchr(a, '\n', m->len - in->off);
        if (!e) e = m->text + m->len;
        const char *f = NULL;
        for (const char *q = a; q + sizeof key - 1 <= e && !f; q++)
            if (!memcmp(q, key, sizeof key - 1)) f = q + sizeof key - 1;
        while (f && f < e && *f != '}') {
            while (f < e && (*f == ' ' || *f == ',' || *f == '%')) f++;
            const char *b = f;
            while (f < e && *f != ',' && *f != '}' && *f != ' ') f++;
            for (uint32_t j = 0; j < w->c->n; j++)
                if (w->c->ins[j].name.n == (uint32_t)(f - b) && !memcmp(w->c->ins[j].name.p, b, (size_t)(f - b)) &&
                    vadd(&w->succ[j], i))
                    return -1;
        }
    }
    return 0;
}

/* The items and buffers of computation ci, in its scheduled order. */
static int walk_build(xwalk *w) {
    const hbmi_comp *c = w->c;
    const hbmi_df *df = w->x->df;
    const hbm_plan *p = w->x->mo->p;
    uint32_t base = df->comp_base[w->ci];
    for (uint32_t i = 0; i < c->n; i++) {
        uint32_t k = new_item(w);
        if (k == NONE) return -1;
        const hbmi_instr *in = &c->ins[i];
        w->it[k].ins = i;
        w->it[k].prev = i ? i - 1 : NONE;
        w->it[k].next = i + 1 < c->n ? i + 1 : NONE;
        w->it[k].gte = in->gte_index;
        w->it[k].alias = in->op == HOP_GTE || in->op == HOP_BITCAST || in->synthetic;
        for (uint32_t j = 0; j < in->n_ops; j++)
            if (vpush(&w->it[k].ops, in->ops[j])) return -1;
    }
    w->first = c->n ? 0 : NONE;
    for (uint32_t i = 0; i < c->n; i++) {
        const hbmi_instr *in = &c->ins[i];
        if (w->it[i].alias || in->op == HOP_WHILE) continue;
        uint32_t nodes = in->shape->prim == HBMI_PRIM_TUPLE && in->op != HOP_TUPLE ? in->shape->nodes : 1;
        for (uint32_t nd = 0; nd < nodes; nd++) {
            const hbmi_vset *vs = hbmi_df_set(df, base + i, nd);
            uint32_t v = NONE;
            for (uint32_t k = 0; k < vs->n; k++)
                if (df->values[hbmi_vset_at(vs, k)].gid == base + i) v = hbmi_vset_at(vs, k);
            if (v == NONE) continue; /* the node holds an operand's buffer */
            uint32_t b = new_buf(w);
            if (b == NONE) return -1;
            const hbmi_value *val = &df->values[v];
            w->bf[b].def = i;
            /* AllocatedSize: a parameter's buffer is the caller's (0), as is an output's */
            w->bf[b].size = hbmi_plan_value_in_device_temp(p, v) && !val->entry_param && !val->constant &&
                                    in->op != HOP_PARAMETER
                                ? (int64_t)val->size
                                : 0;
            w->bf[b].index = nd == 0 ? -1 : -2;
            for (uint32_t j = 0; nd && j < in->shape->n; j++)
                if (hbmi_shape_child(in->shape, j) == nd) w->bf[b].index = (int32_t)j;
            if (alias_walk(w, b, i, nd, 0)) return -1;
            if (w->bf[b].live_out) w->bf[b].size = 0;
            if (vpush(&w->it[i].defd, b)) return -1;
        }
    }
    for (uint32_t b = 0; b < w->n_bf; b++) {
        w->bf[b].unfinished = w->bf[b].users.n;
        for (uint32_t k = 0; k < w->bf[b].users.n; k++)
            if (vadd(&w->it[w->bf[b].users.p[k]].used, b)) return -1;
    }
    return read_successors(w);
}

static int64_t alloc_of(const xwalk *w, uint32_t x) {
    int64_t s = 0;
    for (uint32_t k = 0; k < w->it[x].defd.n; k++) s += w->bf[w->it[x].defd.p[k]].size;
    return s;
}
static int buf_live(const xwalk *w, uint32_t b) { return w->it[w->bf[b].def].placed && w->bf[b].unfinished > 0; }

static void begin_item(xwalk *w, uint32_t x) {
    w->it[x].placed = 1;
    w->cur = x;
    w->mem += alloc_of(w, x);
}

static void end_item(xwalk *w) {
    xitem *x = &w->it[w->cur];
    for (uint32_t k = 0; k < x->used.n; k++) {
        xbuf *b = &w->bf[x->used.p[k]];
        if (--b->unfinished == 0) w->mem -= b->size;
    }
    for (uint32_t k = 0; k < x->defd.n; k++)
        if (w->bf[x->defd.p[k]].unfinished == 0) w->mem -= w->bf[x->defd.p[k]].size;
    w->cur = NONE;
}

/* The items reading item x (HloInstruction::users: the graph, killed items included). */
static int users_of(const xwalk *w, uint32_t x, u32v *out) {
    out->n = 0;
    for (uint32_t y = 0; y < w->n_it; y++)
        if (y != x && vhas(&w->it[y].ops, x) && vpush(out, y)) return -1;
    return 0;
}

/* No user of x but get-tuple-elements and bitcasts without users themselves. */
static int uses_empty(const xwalk *w, uint32_t x, int depth) {
    for (uint32_t y = 0; y < w->n_it; y++) {
        if (y == x || !vhas(&w->it[y].ops, x)) continue;
        if (!w->it[y].alias || depth > 16 || !uses_empty(w, y, depth + 1)) return 0;
    }
    return 1;
}

static int64_t reduced_if_remat(const xwalk *w, uint32_t x) {
    const xitem *it = &w->it[x];
    if (!it->placed || x == w->cur) return 0;
    int64_t r = 0;
    for (uint32_t k = 0; k < it->defd.n; k++) {
        const xbuf *b = &w->bf[it->defd.p[k]];
        if (b->indirect || b->live_out || b->index == -2) return 0;
        if (w->cur != NONE && vhas(&w->it[w->cur].used, it->defd.p[k])) return 0; /* in use */
        if (buf_live(w, it->defd.p[k])) r += b->size;
    }
    for (uint32_t k = 0; k < it->used.n; k++)
        if (!buf_live(w, it->used.p[k])) r -= w->bf[it->used.p[k]].size;
    return r;
}

static int can_remat(const xwalk *w, uint32_t x) {
    const xitem *it = &w->it[x];
    if (it->deny || it->ins == NONE || it->alias) return 0;
    if (!hbmi_fit_can_clone(w->x->m, w->c, &w->c->ins[it->ins])) return 0;
    if ((uint64_t)alloc_of(w, x) < w->x->min_bytes) return 0; /* PromoteNodesToSkip */
    const u32v *s = &w->succ[it->ins]; /* a control successor placed (clones share them) */
    for (uint32_t y = 0; y < w->n_it; y++)
        if (w->it[y].placed && w->it[y].ins != NONE && vhas(s, w->it[y].ins)) return 0;
    return 1;
}

/* PickRematerializationCandidates with blocks of one: the placed items before the current
 * one, in list order. */
static uint32_t pick(xwalk *w, u32v *tmp) {
    uint32_t best = NONE;
    int64_t best_cost = INT64_MAX;
    for (uint32_t x = w->first; x != NONE && x != w->cur && w->it[x].placed; x = w->it[x].next) {
        if (!can_remat(w, x)) continue;
        int64_t red = reduced_if_remat(w, x);
        if (red <= 0) continue;
        if (users_of(w, x, tmp)) return NONE;
        int moved = 1;
        for (uint32_t k = 0; k < tmp->n; k++) moved &= !w->it[tmp->p[k]].placed;
        int64_t cost = moved ? 0 : w->limit / red;
        if (cost < best_cost) {
            best_cost = cost;
            best = x;
        }
    }
    return best;
}

static void insert_before(xwalk *w, uint32_t x, uint32_t before) {
    xitem *it = &w->it[x];
    it->next = before;
    it->prev = w->it[before].prev;
    if (it->prev != NONE) w->it[it->prev].next = x;
    else w->first = x;
    w->it[before].prev = x;
}

/* RematerializeInstructions on item x: the clone, its uses, the tracker, its place. */
static int remat(xwalk *w, uint32_t x, u32v *tmp) {
    uint32_t r = new_item(w);
    if (r == NONE) return -1;
    xitem *X = &w->it[x];
    w->it[r].ins = X->ins;
    w->it[r].src = x;
    w->it[r].gen = (uint8_t)(X->gen + 1);
    w->it[r].gte = X->gte;
    if (vcopy(&w->it[r].ops, &X->ops)) return -1;
    u32v ind = {0};
    int64_t gte_of[64];
    uint32_t gte_item[64], n_gte = 0;
    /* every unplaced use of x's buffers goes to the clone (an element read through a
     * get-tuple-element: to one new get-tuple-element of the clone per index) */
    for (uint32_t d = 0; d < w->it[x].defd.n; d++) {
        const xbuf *B = &w->bf[w->it[x].defd.p[d]];
        for (uint32_t k = 0; k < B->users.n; k++) {
            uint32_t u = B->users.p[k];
            if (w->it[u].placed) continue;
            for (uint32_t j = 0; j < w->it[u].ops.n; j++) {
                uint32_t o = w->it[u].ops.p[j];
                if (o == x) {
                    w->it[u].ops.p[j] = r;
                } else if (o != r && vhas(&B->aliases, o) && !vhas(&ind, o)) {
                    uint32_t to = r;
                    if (B->index >= 0) { /* the element: a get-tuple-element of the clone */
                        uint32_t g = 0;
                        while (g < n_gte && gte_of[g] != B->index) g++;
                        if (g == n_gte && n_gte < 64) {
                            uint32_t gi = new_item(w);
                            if (gi == NONE) return -1;
                            w->it[gi].alias = 1;
                            w->it[gi].gte = B->index;
                            if (vpush(&w->it[gi].ops, r) || vpush(&ind, gi)) return -1;
                            gte_of[n_gte] = B->index;
                            gte_item[n_gte++] = gi;
                        }
                        if (g < n_gte) to = gte_item[g];
                    }
                    w->it[u].ops.p[j] = to;
                }
            }
        }
    }
    /* AddRematerializedInstruction */
    X = &w->it[x];
    if (vcopy(&w->it[r].used, &X->used)) return -1;
    for (uint32_t k = 0; k < X->used.n; k++) {
        xbuf *b = &w->bf[X->used.p[k]];
        if (b->unfinished == 0) w->mem += b->size; /* dead, live again */
        b->unfinished++;
        if (vadd(&b->users, r)) return -1;
    }
    uint32_t table = NONE;
    for (uint32_t d = 0; d < X->defd.n; d++) {
        uint32_t ob = w->it[x].defd.p[d];
        uint32_t nb = new_buf(w);
        if (nb == NONE) return -1;
        xbuf *O = &w->bf[ob], *N = &w->bf[nb];
        N->def = r;
        N->size = O->size;
        N->index = O->index;
        u32v keep = {0};
        for (uint32_t k = 0; k < O->users.n; k++) {
            uint32_t u = O->users.p[k];
            if (w->it[u].placed) {
                if (vpush(&keep, u)) return -1;
            } else if (!w->it[u].alias || vhas(&ind, u)) {
                if (vadd(&N->users, u)) return -1;
            } else { /* an alias left behind: dead */
                w->it[u].used.n = 0;
                w->it[u].killed = 1;
            }
        }
        hbmi_free(O->users.p);
        O->users = keep;
        O->unfinished = 0;
        w->mem -= O->size; /* as XLA does, whether it was live or not */
        N->unfinished = N->users.n;
        if (vpush(&w->it[r].defd, nb)) return -1;
        if (N->index == -1) table = nb;
        for (uint32_t k = 0; k < N->users.n; k++) {
            u32v *ub = &w->it[N->users.p[k]].used;
            for (uint32_t j = 0; j < ub->n; j++)
                if (ub->p[j] == ob) ub->p[j] = nb;
        }
        N->aliases.n = 0;
        if (vpush(&N->aliases, r)) return -1;
    }
    for (uint32_t g = 0; g < ind.n; g++) { /* the new get-tuple-elements read the table */
        uint32_t gi = ind.p[g];
        for (uint32_t d = 0; d < w->it[r].defd.n; d++) {
            xbuf *N = &w->bf[w->it[r].defd.p[d]];
            if (N->index == w->it[gi].gte && vpush(&N->aliases, gi)) return -1;
        }
        if (table != NONE) {
            if (vpush(&w->it[gi].used, table)) return -1;
            w->bf[table].unfinished++;
            if (vadd(&w->bf[table].users, gi)) return -1;
        }
    }
    /* its place: before the earliest unplaced user of the clone, of its get-tuple-elements,
     * of any of its operands, and of its control successors */
    u32v before = {0};
    if (users_of(w, r, tmp)) return -1;
    for (uint32_t k = 0; k < tmp->n; k++)
        if (!vhas(&ind, tmp->p[k]) && vadd(&before, tmp->p[k])) return -1;
    for (uint32_t g = 0; g < ind.n; g++) {
        if (users_of(w, ind.p[g], tmp)) return -1;
        for (uint32_t k = 0; k < tmp->n; k++)
            if (!vhas(&ind, tmp->p[k]) && vadd(&before, tmp->p[k])) return -1;
    }
    for (uint32_t j = 0; j < w->it[r].ops.n; j++) {
        if (users_of(w, w->it[r].ops.p[j], tmp)) return -1;
        for (uint32_t k = 0; k < tmp->n; k++)
            if (tmp->p[k] != r && !w->it[tmp->p[k]].placed && vadd(&before, tmp->p[k])) return -1;
    }
    const u32v *s = &w->succ[w->it[r].ins];
    for (uint32_t y = 0; y < w->n_it; y++)
        if (!w->it[y].placed && w->it[y].ins != NONE && vhas(s, w->it[y].ins) && vadd(&before, y)) return -1;
    uint32_t at = NONE;
    for (uint32_t y = w->cur; y != NONE && at == NONE; y = w->it[y].next)
        if (y != w->cur && vhas(&before, y)) at = y;
    hbmi_free(before.p);
    if (at == NONE) { /* nothing after: cannot happen with an unplaced use; keep the list whole */
        hbmi_free(ind.p);
        return -1;
    }
    insert_before(w, r, at);
    for (uint32_t g = 0; g < ind.n; g++) {
        insert_before(w, ind.p[g], at);
        w->it[ind.p[g]].deny = 1;
    }
    hbmi_free(ind.p);
    if (uses_empty(w, x, 0)) { /* a move */
        if (vhas(&w->moves, x)) w->it[r].deny = 1;
        if (vpush(&w->moves, r)) return -1;
    }
    return 0;
}

static int walk_comp(xctx *x, uint32_t ci, int64_t limit, int do_remat);

/* The peaks of the sequential computations instruction i of w calls (CalledComputationsMemoryUsage). */
static int64_t callee_usage(const xwalk *w, uint32_t y) {
    const xitem *it = &w->it[y];
    if (it->ins == NONE || it->src != NONE) return 0;
    const hbmi_instr *in = &w->c->ins[it->ins];
    int64_t u = 0;
    for (uint32_t k = 0; k < in->n_called; k++)
        if (w->x->m->comps[in->called[k]].kind == HBMI_COMP_SEQUENTIAL) u += w->x->peak[in->called[k]];
    return u;
}

/* The readers of item y when the walk ended, appended to mo->xrd: an instruction of the
 * module, a clone by its record; through the get-tuple-elements and bitcasts the walk added,
 * their readers. */
static int clone_readers(xwalk *w, uint32_t y, int depth) {
    hbmi_fit_model *mo = w->x->mo;
    for (uint32_t u = 0; u < w->n_it; u++) {
        const xitem *t = &w->it[u];
        if (u == y || t->killed || !vhas(&t->ops, y)) continue;
        uint32_t id = NONE;
        if (t->src == NONE && t->ins != NONE) id = t->ins;
        else if (t->rec != NONE) id = HBMI_XLA_REC | t->rec;
        else if (t->alias && depth < 16) {
            if (clone_readers(w, u, depth + 1)) return -1;
            continue;
        }
        if (id == NONE) continue;
        if (mo->n_xrd == w->x->cap_xrd) {
            size_t cap = w->x->cap_xrd;
            if (hbmi_grow((void **)&mo->xrd, &cap, (size_t)mo->n_xrd + 1, sizeof *mo->xrd)) return -1;
            w->x->cap_xrd = (uint32_t)cap;
        }
        mo->xrd[mo->n_xrd++] = id;
    }
    return 0;
}

/* The clones of a walked computation as records of mo->xc: each placed before the first item
 * after it that the round writing it has (no alias, an earlier generation, not yet dropped). */
static int keep_clones(xwalk *w) {
    xctx *x = w->x;
    hbmi_fit_model *mo = x->mo;
    for (uint32_t y = 0; y < w->n_it; y++) {
        if (w->it[y].src == NONE || w->it[y].alias || w->it[y].ins == NONE) continue;
        if (mo->n_xc == x->cap_xc) {
            size_t cap = x->cap_xc;
            if (hbmi_grow((void **)&mo->xc, &cap, (size_t)mo->n_xc + 1, sizeof *mo->xc)) return -1;
            x->cap_xc = (uint32_t)cap;
        }
        w->it[y].rec = mo->n_xc++;
    }
    for (uint32_t y = 0; y < w->n_it; y++) {
        const xitem *it = &w->it[y];
        if (it->rec == NONE) continue;
        hbmi_fit_xla_clone *r = &mo->xc[it->rec];
        memset(r, 0, sizeof *r);
        r->comp = w->ci;
        r->ins = it->ins;
        r->gen = it->gen;
        r->src = w->it[it->src].rec;
        r->src_dead = (uint8_t)uses_empty(w, it->src, 0);
        r->at_ins = w->c->root;
        r->at_src = NONE;
        r->rd = mo->n_xrd;
        if (clone_readers(w, y, 0)) return -1;
        r->n_rd = mo->n_xrd - r->rd;
        for (uint32_t z = it->next; z != NONE; z = w->it[z].next) {
            const xitem *t = &w->it[z];
            if (t->alias || t->ins == NONE || t->gen >= it->gen) continue;
            if (t->gen + 1 < it->gen && uses_empty(w, z, 0)) { /* written, then dropped in a round before */
                int child = 0;
                for (uint32_t q = 0; q < w->n_it && !child; q++) child = w->it[q].src == z;
                if (child) continue;
            }
            r->at_ins = t->ins;
            r->at_src = t->src == NONE ? NONE : t->rec;
            break;
        }
    }
    return 0;
}

static int walk_comp(xctx *x, uint32_t ci, int64_t limit, int do_remat) {
    xwalk w;
    memset(&w, 0, sizeof w);
    w.x = x;
    w.ci = ci;
    w.c = &x->m->comps[ci];
    w.cur = NONE;
    w.limit = limit;
    int rc = -1;
    u32v tmp = {0};
    if (walk_build(&w)) goto out;
    for (uint32_t i = 0; i < w.c->n; i++) /* the callees' peaks first (post order) */
        for (uint32_t k = 0; k < w.c->ins[i].n_called; k++) {
            uint32_t cc = w.c->ins[i].called[k];
            if (cc != ci && x->m->comps[cc].kind == HBMI_COMP_SEQUENTIAL && !x->state[cc] && walk_comp(x, cc, 0, 0)) goto out;
        }
    w.mem = ci == x->m->entry ? x->entry_base : 0;
    int64_t peak = w.mem;
    for (uint32_t y = w.first; y != NONE; y = w.it[y].next) {
        int64_t callee = callee_usage(&w, y);
        begin_item(&w, y);
        if (do_remat && alloc_of(&w, y) + callee > 0)
            while (w.mem + callee > limit) {
                uint32_t b = pick(&w, &tmp);
                if (b == NONE) break;
                if (remat(&w, b, &tmp)) goto out;
            }
        if (do_remat && callee > 0 && w.mem + callee > limit) {
            const hbmi_instr *in = &w.c->ins[w.it[y].ins];
            for (uint32_t k = 0; k < in->n_called; k++) {
                uint32_t cc = in->called[k];
                if (x->m->comps[cc].kind != HBMI_COMP_SEQUENTIAL || x->state[cc] == 2) continue;
                int64_t sub = limit - w.mem > 0 ? limit - w.mem : 0;
                if (x->peak[cc] > sub && walk_comp(x, cc, sub, 1)) goto out;
            }
            callee = callee_usage(&w, y);
        }
        if (w.mem + callee > peak) peak = w.mem + callee;
        end_item(&w);
    }
    if (do_remat && keep_clones(&w)) goto out;
    x->peak[ci] = peak;
    if (x->state[ci] < (do_remat ? 2 : 1)) x->state[ci] = do_remat ? 2 : 1;
    rc = 0;
out:
    hbmi_free(tmp.p);
    walk_free(&w);
    return rc;
}

/* Mark, for the report, one candidate per instruction XLA's walk cloned (a candidate made for
 * it when the model has none: XLA's rules are not the model's). */
static hbm_status mark_cloned(hbmi_fit_model *mo) {
    for (uint32_t k = 0; k < mo->n_xc; k++) {
        const hbmi_fit_xla_clone *r = &mo->xc[k];
        int seen = 0;
        for (uint32_t j = 0; j < k && !seen; j++) seen = mo->xc[j].comp == r->comp && mo->xc[j].ins == r->ins;
        if (seen) continue;
        uint32_t found = NONE;
        for (uint32_t c = 0; c < mo->n_cand && found == NONE; c++)
            if (mo->cand[c].edit.kind == HBM_FIT_REMATERIALIZE && mo->cand[c].edit.comp == r->comp &&
                mo->cand[c].edit.ins == r->ins)
                found = c;
        if (found == NONE) {
            const hbmi_comp *cp = &mo->m->comps[r->comp];
            const hbmi_df *df = hbmi_plan_df(mo->p);
            hbmi_fit_cand cd;
            memset(&cd, 0, sizeof cd);
            cd.edit.kind = HBM_FIT_REMATERIALIZE;
            cd.edit.comp = r->comp;
            cd.edit.ins = r->ins;
            cd.edit.at = r->at_ins;
            cd.group = df->comp_base[r->comp] + r->ins;
            cd.verified_peak = -1;
            uint32_t nodes = cp->ins[r->ins].shape->prim == HBMI_PRIM_TUPLE ? cp->ins[r->ins].shape->nodes : 1;
            for (uint32_t nd = 0; nd < nodes; nd++) {
                const hbmi_vset *vs = hbmi_df_set(df, cd.group, nd);
                for (uint32_t q = 0; q < vs->n; q++)
                    if (df->values[hbmi_vset_at(vs, q)].gid == cd.group) cd.bytes += df->values[hbmi_vset_at(vs, q)].size;
            }
            cd.flops = hbmi_fit_instr_flops(mo->m, cp, &cp->ins[r->ins]);
            hbm_status s = hbmi_fit_model_add(mo, &cd);
            if (s) return s;
            found = mo->n_cand - 1;
        }
        mo->cand[found].xla_chosen = 1;
    }
    return HBM_OK;
}

static void xla_lists(hbmi_fit_model *mo, int64_t limit, const hbmi_fit_xla_rule *rule, int64_t *before,
                      int64_t *after) {
    const hbm_hlo_module *m = mo->m;
    xctx x;
    memset(&x, 0, sizeof x);
    x.mo = mo;
    x.m = m;
    x.df = hbmi_plan_df(mo->p);
    x.min_bytes = rule->min_remat_bytes;
    x.entry_base = rule->count_args ? (int64_t)mo->args : 0;
    x.peak = hbmi_calloc(m->n_comps + 1, sizeof *x.peak);
    x.state = hbmi_calloc(m->n_comps + 1, 1);
    hbmi_free(mo->xc);
    mo->xc = NULL;
    mo->n_xc = 0;
    hbmi_free(mo->xrd);
    mo->xrd = NULL;
    mo->n_xrd = 0;
    *before = *after = 0;
    if (!x.peak || !x.state || walk_comp(&x, m->entry, 0, 0)) goto out;
    *before = *after = x.peak[m->entry];
    if (*before > limit) {
        if (walk_comp(&x, m->entry, limit, 1)) {
            mo->n_xc = 0;
            goto out;
        }
        *after = x.peak[m->entry];
    }
    if (mark_cloned(mo)) mo->n_xc = 0;
out:
    hbmi_free(x.peak);
    hbmi_free(x.state);
}

static uint32_t find_name(const hbmi_comp *c, const char *nm) {
    size_t n = strlen(nm);
    for (uint32_t i = 0; i < c->n; i++)
        if (c->ins[i].name.n == n && !memcmp(c->ins[i].name.p, nm, n)) return i;
    return NONE;
}

/* HloDCE after the walk (HloRematerialization::Run runs it; HloPassFix<HloDCE> in newer
 * versions): a line the writer added that nothing reads is removed, again until none is left
 * (a clone read only by a clone that was moved on, whose own line is not written). */
static hbm_status drop_unread(const hbm_hlo_module *orig, char **t, size_t *tl) {
    for (int pass = 0; pass < 64; pass++) {
        hbm_hlo_module *m2 = NULL;
        hbm_status s = hbm_hlo_parse(*t, *tl, "fit", &m2);
        if (s) return s;
        const char *x = m2->text;
        size_t n = m2->len, w = 0, from = 0, gone = 0;
        char *o = malloc(n + 1);
        if (!o) {
            hbm_hlo_module_free(m2);
            return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
        }
        for (uint32_t c = 0; c < m2->n_comps && c < orig->n_comps; c++) {
            const hbmi_comp *cp = &m2->comps[c];
            uint32_t *rd = hbmi_calloc(cp->n + 1, sizeof *rd); /* readers (the parse leaves users unset) */
            if (!rd) {
                free(o);
                hbm_hlo_module_free(m2);
                return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            }
            for (uint32_t i = 0; i < cp->n; i++)
                for (uint32_t k = 0; k < cp->ins[i].n_ops; k++)
                    if (cp->ins[i].ops[k] < cp->n) rd[cp->ins[i].ops[k]]++;
            for (uint32_t i = 0; i < cp->n; i++) {
                const hbmi_instr *in = &cp->ins[i];
                if (in->is_root || in->synthetic || rd[i] || in->off >= n) continue;
                char nm[512];
                snprintf(nm, sizeof nm, "%.*s", (int)in->name.n, in->name.p);
                if (!strstr(nm, ".remat") || find_name(&orig->comps[c], nm) != NONE) continue;
                size_t a = in->off, b;
                while (a > 0 && x[a - 1] != '\n') a--;
                if (i + 1 < cp->n && cp->ins[i + 1].off > in->off) {
                    b = cp->ins[i + 1].off;
                    while (b > in->off && x[b - 1] != '\n') b--;
                } else {
                    const char *e = memchr(x + in->off, '\n', n - in->off);
                    b = e ? (size_t)(e - x) + 1 : n;
                }
                if (a < from) continue;
                memcpy(o + w, x + from, a - from);
                w += a - from;
                from = b;
                gone++;
            }
            hbmi_free(rd);
        }
        memcpy(o + w, x + from, n - from);
        w += n - from;
        hbm_hlo_module_free(m2);
        if (!gone) {
            free(o);
            return HBM_OK;
        }
        free(*t);
        *t = o;
        *tl = w;
    }
    return HBM_OK;
}

hbm_status hbmi_fit_xla_write(const hbmi_fit_model *mo, char **text, size_t *len) {
    *text = NULL;
    *len = 0;
    const hbmi_df *df0 = hbmi_plan_df(mo->p);
    uint32_t gens = 0;
    for (uint32_t k = 0; k < mo->n_xc; k++)
        if (mo->xc[k].gen > gens) gens = mo->xc[k].gen;
    char **name = hbmi_calloc(mo->n_xc + 1, sizeof *name);
    hbmi_fit_edit *ed = hbmi_malloc(sizeof *ed * (mo->n_xc + 1));
    uint32_t *edk = hbmi_malloc(sizeof *edk * (mo->n_xc + 1));
    uint32_t *rdb = hbmi_malloc(sizeof *rdb * (mo->n_xrd + 1));
    uint8_t *twin = hbmi_calloc(mo->n_xc + 1, 1);
    if (!name || !ed || !edk || !rdb || !twin) {
        hbmi_free(name);
        hbmi_free(ed);
        hbmi_free(edk);
        hbmi_free(rdb);
        hbmi_free(twin);
        return hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
    }
    /* a value its own clones made live again can be cloned twice in one round (a clone of
     * one of its readers reads it again): such clones are written each with the readers the
     * walk gave it (twin) */
    for (uint32_t k = 0; k < mo->n_xc; k++)
        for (uint32_t j = 0; j < k; j++)
            if (mo->xc[j].gen == mo->xc[k].gen && mo->xc[j].comp == mo->xc[k].comp && mo->xc[j].src == mo->xc[k].src &&
                (mo->xc[k].src != NONE || mo->xc[j].ins == mo->xc[k].ins))
                twin[j] = twin[k] = 1;
    const hbm_hlo_module *cur = mo->m;
    hbm_hlo_module *own = NULL;
    hbmi_df *own_df = NULL;
    char *t = NULL;
    size_t tl = 0;
    hbm_status s = HBM_OK;
    for (uint32_t g = 1; g <= gens && !s; g++) {
        size_t n = 0;
        for (uint32_t k = 0; k < mo->n_xc && !s; k++) {
            const hbmi_fit_xla_clone *r = &mo->xc[k];
            edk[k] = NONE;
            if (r->gen != g) continue;
            const hbmi_comp *c0 = &mo->m->comps[r->comp], *c = &cur->comps[r->comp];
            char buf[512];
            const char *src = r->src == NONE ? NULL : name[r->src];
            const char *at = r->at_src == NONE ? NULL : name[r->at_src];
            if (!src) {
                snprintf(buf, sizeof buf, "%.*s", (int)c0->ins[r->ins].name.n, c0->ins[r->ins].name.p);
                src = buf;
            }
            char abuf[512];
            if (!at) {
                snprintf(abuf, sizeof abuf, "%.*s", (int)c0->ins[r->at_ins].name.n, c0->ins[r->at_ins].name.p);
                at = abuf;
            }
            uint32_t si = find_name(c, src), ai = find_name(c, at);
            if (si == NONE || ai == NONE) {
                s = hbmi_error(HBM_ERR_INVALID, "fit: XLA's clone of %s before %s has no place in round %u", src, at, g);
                break;
            }
            memset(&ed[n], 0, sizeof ed[n]);
            ed[n].kind = HBM_FIT_REMATERIALIZE;
            ed[n].drop = r->src_dead;
            ed[n].comp = r->comp;
            ed[n].ins = si;
            ed[n].at = ai;
            /* the name the writer gives it (a second clone of one line: NAME.remat.1) */
            if (!(name[k] = hbmi_fit_clone_name(cur, ed, n))) s = hbmi_error(HBM_ERR_NOMEM, "fit: out of host memory");
            edk[k] = (uint32_t)n++;
        }
        /* the twins' readers, as lines of this round's module: the readers the walk left to the
         * clone and to the clones later rounds make of it (those take theirs from it then); an
         * instruction, a clone written in a round before, or the clone line of an edit of this
         * one (its computation's count + the edit); a clone of a later round is written from
         * its source's line */
        size_t nb = 0;
        for (uint32_t k = 0; k < mo->n_xc && !s; k++) {
            const hbmi_fit_xla_clone *r = &mo->xc[k];
            if (edk[k] == NONE || !twin[k]) continue;
            const hbmi_comp *c0 = &mo->m->comps[r->comp], *c = &cur->comps[r->comp];
            ed[edk[k]].rd = rdb + nb;
            for (uint32_t e = 0; e < mo->n_xc; e++) {
                uint32_t a = e;
                while (a != NONE && mo->xc[a].gen > g) a = mo->xc[a].src;
                if (a != k) continue;
                for (uint32_t q = 0; q < mo->xc[e].n_rd && nb < mo->n_xrd; q++) {
                    uint32_t id = mo->xrd[mo->xc[e].rd + q], to = NONE;
                    if (!(id & HBMI_XLA_REC)) {
                        char nb2[512];
                        snprintf(nb2, sizeof nb2, "%.*s", (int)c0->ins[id].name.n, c0->ins[id].name.p);
                        to = find_name(c, nb2);
                    } else {
                        uint32_t j = id & ~HBMI_XLA_REC;
                        if (mo->xc[j].gen < g && name[j]) to = find_name(c, name[j]);
                        else if (mo->xc[j].gen == g && edk[j] != NONE) to = c->n + edk[j];
                    }
                    if (to != NONE) rdb[nb++] = to;
                }
            }
            ed[edk[k]].n_rd = (uint32_t)(rdb + nb - ed[edk[k]].rd);
        }
        if (s) break;
        free(t);
        t = NULL;
        s = hbmi_fit_write_mem(cur, ed, n, &t, &tl);
        if (s || g == gens) break;
        hbm_hlo_module *m2 = NULL;
        hbmi_df *d2 = NULL;
        s = hbm_hlo_parse(t, tl, "fit", &m2);
        if (!s) s = hbmi_df_run(m2, df0->pointer_size, df0->tuple_align, &d2);
        hbmi_df_free(own_df);
        hbm_hlo_module_free(own);
        own = m2;
        own_df = d2;
        cur = m2;
    }
    for (uint32_t k = 0; k < mo->n_xc; k++) hbmi_free(name[k]);
    hbmi_free(name);
    hbmi_free(ed);
    hbmi_free(edk);
    hbmi_free(rdb);
    hbmi_free(twin);
    hbmi_df_free(own_df);
    hbm_hlo_module_free(own);
    if (!s && t) s = drop_unread(mo->m, &t, &tl);
    if (s) {
        free(t);
        return s;
    }
    *text = t;
    *len = tl;
    return HBM_OK;
}
