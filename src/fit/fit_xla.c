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
 * the limit XLA warns "Can't reduce memory use below ...", written here the same way. */
#include <stdio.h>
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

void hbmi_fit_xla(hbmi_fit_model *mo, int64_t limit, const hbmi_fit_xla_rule *rule, char *msg, size_t cap) {
    uint32_t n = mo->n;
    if (msg && cap) msg[0] = 0;
    for (uint32_t k = 0; k < mo->n_cand; k++) mo->cand[k].xla_chosen = 0;
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
out:
    hbmi_free(ctl);
    hbmi_free(picks);
    hbmi_free(live);
    hbmi_free(gused);
    hbmi_free(groups);
}
