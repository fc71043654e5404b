/* test_bfc_check.c - hbm_check on the bfc allocator finds each kind of corruption.
 * White-box: this file compiles src/alloc/bfc.c into itself (the library's copy is then
 * not linked), damages the state one way at a time, expects HBM_ERR_CORRUPT, repairs it
 * and expects the check to pass again. */
#include "test.h"

#include "alloc/bfc.c"

static bfc *self_of(hbm_allocator *a) { return (bfc *)a->self; }

#define EXPECT_CORRUPT(a, what)                                                                   \
    do {                                                                                          \
        CHECK_STATUS(hbm_check(a), HBM_ERR_CORRUPT);                                              \
        CHECK_CONTAINS(hbm_last_error(), what);                                                   \
    } while (0)

/* Three live blocks around two free ones: [A live][free][B live][C live][free tail]. */
static void setup(hbm_device **d, hbm_allocator **a, uint64_t p[4]) {
    CHECK_OK(hbm_device_open("sim:1GiB", d));
    CHECK_OK(hbm_allocator_open(*d, "allocator=bfc,limit=64MiB", a));
    for (int i = 0; i < 4; i++) CHECK_OK(hbm_alloc(*a, 4096, NULL, &p[i]));
    CHECK_OK(hbm_free(*a, p[1]));
    CHECK_OK(hbm_check(*a));
}

static uint32_t chunk_at(bfc *b, uint64_t addr) {
    for (uint32_t i = 0; i < b->recs.n; i++)
        if (ch_state(&b->ch[i]) != CH_UNUSED && ch_addr(&b->ch[i]) == addr) return i;
    return NONE;
}

static void test_check_finds_damage(void) {
    hbm_device *d;
    hbm_allocator *a;
    uint64_t p[4];
    setup(&d, &a, p);
    bfc *b = self_of(a);
    uint32_t live = chunk_at(b, p[0]), hole = chunk_at(b, p[1]), next = chunk_at(b, p[2]);
    CHECK(live != NONE && hole != NONE && next != NONE);
    CHECK(ch_state(&b->ch[live]) == CH_LIVE && ch_state(&b->ch[hole]) == CH_FREE);

    /* a block moves: a gap before it, an overlap after */
    b->ch[hole].addr += 256;
    EXPECT_CORRUPT(a, "gap or overlap");
    b->ch[hole].addr -= 256;
    CHECK_OK(hbm_check(a));

    /* the stats drift */
    b->st.bytes_in_use += 256;
    EXPECT_CORRUPT(a, "bytes_in_use");
    b->st.bytes_in_use -= 256;
    b->st.num_regions++;
    EXPECT_CORRUPT(a, "regions");
    b->st.num_regions--;
    CHECK_OK(hbm_check(a));

    /* a bitmap bit without a list, and a list without its bit */
    b->sl_bits[0] ^= 1;
    b->fl_bits |= 1;
    EXPECT_CORRUPT(a, "disagrees");
    b->sl_bits[0] ^= 1;
    b->fl_bits = 0;
    for (unsigned f = 0; f < BFC_FL; f++)
        if (b->sl_bits[f]) b->fl_bits |= 1ull << f;
    CHECK_OK(hbm_check(a));

    /* a free block dropped from its class list */
    unsigned fl, sl;
    bfc_class(b->ch[hole].size, &fl, &sl);
    uint32_t saved_head = b->heads[fl * BFC_SL + sl];
    CHECK(saved_head == hole && b->ch[hole].fnext == NONE);
    b->heads[fl * BFC_SL + sl] = NONE;
    EXPECT_CORRUPT(a, "disagrees");
    b->heads[fl * BFC_SL + sl] = saved_head;
    CHECK_OK(hbm_check(a));

    /* a free block filed in the wrong class */
    list_remove(b, hole);
    b->ch[hole].size += 256 * 64; /* lie about the size while filing */
    list_push(b, hole);
    b->ch[hole].size -= 256 * 64;
    EXPECT_CORRUPT(a, "belongs in");
    b->ch[hole].size += 256 * 64;
    list_remove(b, hole);
    b->ch[hole].size -= 256 * 64;
    list_push(b, hole);
    CHECK_OK(hbm_check(a));

    /* a live block marked free next to a free block: not coalesced (and in no list) */
    uint64_t saved_size = b->ch[next].size;
    b->ch[next].size = ch_size(&b->ch[next]);
    EXPECT_CORRUPT(a, "coalesced");
    b->ch[next].size = saved_size;
    CHECK_OK(hbm_check(a));

    /* the address index loses a live block, or points at the wrong record */
    uint32_t *slot = tab_find(b, p[2]);
    CHECK(slot != NULL && (*slot & ~b->tabhi) == next);
    *slot = (*slot & b->tabhi) | live;
    EXPECT_CORRUPT(a, "address index");
    *slot = (*slot & b->tabhi) | next;
    CHECK_OK(hbm_check(a));
    /* a slot whose tag is not its address's */
    *slot ^= 1u << b->tabib;
    EXPECT_CORRUPT(a, "address index");
    *slot ^= 1u << b->tabib;
    CHECK_OK(hbm_check(a));
    /* a line's overflow count drifts: lookups would stop early, or go on */
    size_t line = (size_t)(slot - b->tab) & ~(size_t)(TAB_LINE - 1);
    b->tab[line]++;
    EXPECT_CORRUPT(a, "passed it");
    b->tab[line]--;
    CHECK_OK(hbm_check(a));

    /* a back link breaks */
    uint32_t saved_prev = b->ch[next].prev;
    b->ch[next].prev = live;
    EXPECT_CORRUPT(a, "back link");
    b->ch[next].prev = saved_prev;
    CHECK_OK(hbm_check(a));

    /* a live block's sequence number is from the future, or its flags are unknown */
    uint64_t saved_seq = b->ch[next].seq;
    b->ch[next].seq = b->st.num_allocs + 1;
    EXPECT_CORRUPT(a, "sequence number");
    b->ch[next].seq = saved_seq;
    b->ch[next].size |= 64;
    EXPECT_CORRUPT(a, "flag bits");
    b->ch[next].size &= ~(uint64_t)64;
    CHECK_OK(hbm_check(a));

    /* a free block carries a live block's bits in its address */
    b->ch[hole].addr |= 3;
    EXPECT_CORRUPT(a, "flag bits");
    b->ch[hole].addr &= ~(uint64_t)3;
    CHECK_OK(hbm_check(a));

    /* the list of unused records loses one */
    CHECK_OK(hbm_free(a, p[2])); /* merges with the hole: one record becomes unused */
    CHECK(b->recs.n - b->recs.used >= 1); /* (the pool of records: n - used are unused) */
    b->recs.used--;
    EXPECT_CORRUPT(a, "unused");
    b->recs.used++;
    CHECK_OK(hbm_check(a));

    hbm_allocator_close(a);
    hbm_device_close(d);
}

static void test_classes_are_monotonic(void) {
    /* every size maps to a class whose range holds it, and classes grow with size */
    unsigned pf = 0, ps = 0;
    for (uint64_t u = 1; u < (1u << 20); u += 1 + u / 97) {
        unsigned fl, sl;
        bfc_class(u << BFC_SHIFT, &fl, &sl);
        CHECK(fl < BFC_FL && sl < BFC_SL);
        CHECK(fl > pf || (fl == pf && sl >= ps));
        pf = fl;
        ps = sl;
    }
    unsigned fl, sl;
    bfc_class(UINT64_MAX & ~(uint64_t)255, &fl, &sl);
    CHECK(fl < BFC_FL && sl < BFC_SL);
}

/* The address index alone, at its fill limit with small tables (so lines fill, runs cross
 * lines and wrap past the end, and overflow counts rise and fall: half the addresses are at
 * home in the last or the first line), with 8-bit tags (which collide often) and with a
 * 1-bit tag that is always 0 (31 index bits: every entry of a line is a candidate), and
 * rebuilt halfway with the other index width, as a growth of the records does: after every
 * insertion or deletion each entry is found in its slot, each removed one is not, and
 * every line's count is the number of entries that passed it. */
static void test_index_full_lines(void) {
    test_rng rng = {0x51ed2705u};
    for (int wide = 0; wide < 2; wide++) {
        for (size_t cap = 64; cap <= 1024; cap *= 4) {
            enum { MAXN = 2048 };
            static bfc_chunk recs[MAXN];
            int in[MAXN];
            bfc b;
            memset(&b, 0, sizeof b);
            b.ch = recs;
            b.tabib = wide ? 31 : tab_ib(MAXN);
            b.tabhi = UINT32_MAX << b.tabib;
            b.recs.n = MAXN;
            CHECK(wide || b.tabib == 24);
            CHECK_OK(tab_reserve(&b, cap / 2));
            CHECK(b.tabcap == cap);
            size_t limit = 0, passed_lines = 0;
            while (!TAB_FILL(limit + 1, cap)) limit++; /* what bfc_alloc lets it hold */
            size_t last = cap - TAB_LINE;
            for (uint32_t i = 0; i < MAXN; i++) { /* half of them at home in the last or first line */
                size_t home;
                do {
                    recs[i].addr = (test_below(&rng, 1u << 24) + 1) << BFC_SHIFT;
                    home = tab_home(b.tabshift, tab_hash(recs[i].addr));
                } while (i % 2 && home != 0 && home != last);
                in[i] = 0;
            }
            for (int step = 0; step < 4000; step++) {
                if (step == 2000) { /* the records grew past (or back under) 2^24: other index width */
                    unsigned ib = b.tabib == 31 ? tab_ib(MAXN) : 31;
                    CHECK_OK(tab_rebuild(&b, b.tabcap, ib));
                    CHECK(b.tabib == ib && b.tabcap == cap);
                }
                uint32_t i = (uint32_t)test_below(&rng, limit + limit / 2);
                if (!in[i] && b.tabcount < limit) {
                    if (tab_find(&b, recs[i].addr)) continue; /* a random address repeated */
                    tab_put(&b, recs[i].addr, i);
                    in[i] = 1;
                } else if (in[i]) {
                    uint32_t *s = tab_find(&b, recs[i].addr);
                    CHECK(s && (*s & ~b.tabhi) == i);
                    size_t home = 0; /* the entry out, as the allocator's free does */
                    uint32_t *slot = tab_lookup(&b, recs[i].addr, &home);
                    tab_del_in(&b, slot, home);
                    in[i] = 0;
                }
                size_t live = 0;
                for (uint32_t k = 0; k < limit + limit / 2; k++) {
                    uint32_t *s = tab_find(&b, recs[k].addr);
                    if (in[k]) {
                        CHECK(s && (*s & ~b.tabhi) == k);
                        live++;
                    } else {
                        CHECK(!s || (*s & ~b.tabhi) != k);
                    }
                }
                CHECK(live == b.tabcount);
                for (uint32_t k = 0; k < MAXN; k++) recs[k].size = in[k] ? 256 | F_LIVE : 256;
                CHECK_OK(check_index(&b));
                for (size_t l = 0; l < cap; l += TAB_LINE) passed_lines += b.tab[l] != 0;
            }
            CHECK(passed_lines > 0); /* entries overflowed their home lines */
            hbmi_zone_free(b.tab, b.tabcap * sizeof *b.tab);
        }
    }
}

int main(void) {
    RUN(test_check_finds_damage);
    RUN(test_classes_are_monotonic);
    RUN(test_index_full_lines);
    return test_done();
}
