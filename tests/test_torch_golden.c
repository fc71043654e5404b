/* test_torch_golden.c - allocator=torch makes the same decisions as it did before its free
 * lists got express lanes and walk nodes (2026-11-25): a fixed pseudo-random sequence of
 * allocations and frees (three streams, sizes in both pools and past 10 MiB) under several
 * settings, every returned address and some stats folded into a digest that the earlier
 * code printed. A change of any placement, segment or OOM changes the digest. */
#include "test.h"

#define WINDOW 4096

typedef struct golden {
    const char *config;
    uint64_t ops, digest, ooms;
} golden;

static uint64_t run(const char *config, uint64_t ops, uint64_t *ooms) {
    hbm_device *dev = NULL;
    hbm_allocator *a = NULL;
    if (hbm_device_open("sim:80GiB", &dev) || hbm_allocator_open(dev, config, &a)) return 0;
    static uint64_t live[WINDOW], strm[WINDOW];
    memset(live, 0, sizeof live);
    uint64_t rng = 0x9e3779b97f4a7c15ULL, h = 1469598103934665603ULL;
    *ooms = 0;
    for (uint64_t i = 0; i < ops; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        size_t k = rng % WINDOW;
        if (live[k]) {
            if (hbm_free_stream(a, live[k] - 1, strm[k])) return 0;
            live[k] = 0;
        } else {
            uint64_t r2 = rng * 0x2545F4914F6CDD1DULL, addr;
            unsigned cls = (r2 >> 60) & 15;
            uint64_t size = cls < 10 ? 1 + (r2 >> 20) % (1 << 20) : cls < 14 ? 1 + (r2 >> 20) % (12 << 20) : 1 + (r2 >> 20) % (200 << 20);
            uint64_t st = (r2 >> 8) % 3;
            hbm_status s = hbm_alloc_stream(a, size, NULL, st, &addr);
            if (s == HBM_ERR_OOM) {
                ++*ooms;
                continue;
            }
            if (s) return 0;
            live[k] = addr + 1, strm[k] = st;
            h = (h ^ addr) * 1099511628211ULL;
        }
        if (i % 4096 == 0) {
            hbm_stats st;
            if (hbm_stats_get(a, &st) || hbm_check(a)) return 0;
            h = (h ^ st.bytes_reserved ^ st.largest_free_block_bytes) * 1099511628211ULL;
        }
    }
    if (hbm_check(a)) return 0;
    hbm_allocator_close(a);
    hbm_device_close(dev);
    return h;
}

static void test_same_decisions(void) {
    static const golden g[] = {
/* config, operations, digest and OOMs printed by the code before the change */
        {"allocator=torch", 300000, 0xef1148b09af51d73ull, 0},
        {"allocator=torch,expandable_segments=true", 300000, 0x37fd4a1fdc013973ull, 0},
        {"allocator=torch,max_split_size_mb=64,fraction=0.05", 100000, 0x393b962ff7b69d69ull, 9275},
        {"allocator=torch,roundup_power2_divisions=4,max_split_size_mb=128", 200000, 0x2f64c93b5ca57fa1ull, 0},
        {"allocator=torch,garbage_collection_threshold=0.5,fraction=0.06", 60000, 0xe73230747cfbb5e9ull, 5316},
        /* what that code printed for this one alone in its process: the digest folds in the
         * virtual addresses, which came from a process-wide counter (0x163eaa7c78075369 after
         * the second row's segments); they now come from each allocator's own */
        {"allocator=torch,expandable_segments=true,fraction=0.05", 20000, 0x0b059f3564c75369ull, 3218},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        uint64_t ooms = 0, d = run(g[i].config, g[i].ops, &ooms);
        if (d != g[i].digest || ooms != g[i].ooms)
            fprintf(stderr, "%s: digest %016" PRIx64 " with %" PRIu64 " OOMs, want %016" PRIx64 " with %" PRIu64 "\n",
                    g[i].config, d, ooms, g[i].digest, g[i].ooms);
        CHECK(d == g[i].digest && ooms == g[i].ooms);
    }
}

int main(void) {
    RUN(test_same_decisions);
    return test_done();
}
