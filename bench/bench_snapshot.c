/* bench_snapshot.c - gigabyte PyTorch snapshots: generates a realistic one (a training
 * loop's history: millions of events, stacks of 10-30 frames shared between allocations,
 * a caching allocator's segments) and writes it with hbm's pickle primitives laid out as
 * torch.cuda.memory._dump_snapshot() lays it out (every object memoized; each event's
 * "frames" its own list of shared frame dicts; entries appended in batches of 1000), so
 * its bytes per event are those of real snapshots; also as JSON. Then it measures what a
 * user runs on it, each as its own process (wall and CPU time, peak resident memory):
 *   hbm view BIG.pickle (--json, --html PAGE), and JSON load speed (hbm view --json BIG.json);
 * and, in this process, replay speed (events per second per configuration).
 * Usage: bench_snapshot [MB]   (pickle size to aim at, default 1000; files in $TMPDIR or /tmp,
 * removed at the end unless HBM_BENCH_KEEP is set). The hbm binary is the one beside this program. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/internal.h"
#include "hbm/hbm.h"
#include "trace/trace_internal.h"

#include "run_child.h"
#include "snapshot_gen.h"

/* JSON of a snapshot of the same kind (frames written out in every event, as JSON has no
 * shared references): segments with their block, then the history. */
static int write_json(const hbm_trace *t, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fputs("{\"segments\": [], \"device_traces\": [[", f);
    for (size_t i = 0; i < t->count; i++) {
        const hbm_trace_event *e = &t->events[i];
        static const char *act[] = {"", "alloc", "free_completed", "oom", "segment_alloc", "segment_free"};
        if (e->kind > HBM_EV_SEGMENT_FREE || !e->kind) continue;
        fprintf(f, "%s{\"action\": \"%s\", \"addr\": %" PRIu64 ", \"size\": %" PRIu64
                   ", \"stream\": 0, \"time_us\": %" PRIu64 ", \"frames\": [",
                i ? ", " : "", act[e->kind], e->addr, e->size, e->time_ns / 1000);
        size_t n = 0;
        const uint64_t *fr = hbm_trace_backtrace(t, e->backtrace, &n);
        for (size_t k = 0; k < n; k++) {
            const hbm_tag *tg = hbm_trace_tag(t, (uint32_t)fr[k]);
            fprintf(f, "%s{\"filename\": \"%s\", \"line\": %d, \"name\": \"%s\"}", k ? ", " : "", tg->source_file,
                    tg->source_line, tg->op_name);
        }
        fputs("]}", f);
    }
    fputs("]]}\n", f);
    return fclose(f);
}

static char run_log[1200]; /* the last child's stderr */

/* Run argv with stdout to out (NULL: /dev/null), its messages to the log. */
static run_result run_to(char *const *argv, const char *out) { return run_child(argv, out, run_log); }

static run_result run(char *const *argv) { return run_to(argv, NULL); }

/* Open the page in headless Chromium (when installed) until its script has drawn it. */
/* Open the page in headless Chromium (when installed): the time from its navigation to its
 * load event with the drawing done (the page's own clock, through a copy that logs it to
 * the console), and the whole run (the browser's start and --dump-dom's copy of the DOM
 * included). */
static void open_page(const char *html, const char *dir) {
    static const char *browsers[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"};
    static const char probe_js[] = "<head><script>addEventListener('load',()=>console.log('hbm-probe '+"
                                   "performance.now().toFixed(0)+' '+(document.body.dataset.ready||'0')))</script>";
    const char *b = NULL;
    for (size_t i = 0; i < sizeof browsers / sizeof browsers[0] && !b; i++)
        if (!access(browsers[i], X_OK)) b = browsers[i];
    if (!b) {
        printf("  %-30s skipped: no chromium installed (scripts/deps.sh test installs it)\n", "HTML page in Chromium");
        return;
    }
    char url[1400], profile[1400], probe[1300], line[4096];
    snprintf(probe, sizeof probe, "%s/probe.html", dir);
    char *page = NULL;
    size_t len = 0;
    FILE *f = NULL;
    if (hbmi_read_file(html, &page, &len) || !strstr(page, "<head>") || !(f = fopen(probe, "w"))) {
        printf("  %-30s skipped: cannot copy the page\n", "HTML page in Chromium");
        hbmi_free(page);
        return;
    }
    char *head = strstr(page, "<head>");
    fwrite(page, 1, (size_t)(head - page), f);
    fputs(probe_js, f);
    fputs(head + 6, f);
    hbmi_free(page);
    if (fclose(f)) return;
    snprintf(url, sizeof url, "file://%s", probe);
    snprintf(profile, sizeof profile, "--user-data-dir=%s/profile", dir);
    char *argv[] = {(char *)b, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
                    "--disable-background-networking", "--enable-logging=stderr", "--v=0", profile, "--dump-dom",
                    url, NULL};
    run_result r = run(argv); /* the console goes to the log */
    double ms = -1;
    int ready = 0;
    f = fopen(run_log, "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "hbm-probe ");
        if (p) ms = atof(p + 10), ready = atoi(strchr(p + 10, ' ') ? strchr(p + 10, ' ') + 1 : "0");
    }
    if (f) fclose(f);
    if (ms < 0) printf("  %-30s no load event logged (%.2f s in all)\n", "HTML page in Chromium", r.seconds);
    else
        printf("  %-30s %6.2f s to load and draw (target < 5 s)%s; %.2f s in all with the browser's start and "
               "--dump-dom\n", "HTML page in Chromium", ms / 1e3, ready ? "" : "  NOT DRAWN", r.seconds);
    unlink(probe);
    char rm[1400];
    snprintf(rm, sizeof rm, "rm -rf '%s/profile'", dir);
    if (system(rm)) printf("    (could not remove %s/profile)\n", dir);
}

static double file_mb(const char *path) {
    struct stat sb;
    return stat(path, &sb) ? 0 : (double)sb.st_size / 1e6;
}

static void show_log(run_result r) {
    char line[512];
    FILE *f = r.status ? fopen(run_log, "r") : NULL;
    while (f && fgets(line, sizeof line, f)) printf("    %s", line);
    if (f) fclose(f);
}

static void report(const char *what, run_result r, double mb, double limit_s) {
    printf("  %-30s %6.2f s (CPU %5.2f s) %6.1f MB/s  peak RSS %5.0f MB = %.2fx the file (targets <= %.0f s, <= 2x)%s\n",
           what, r.seconds, r.cpu, mb / r.seconds, r.maxrss_kb / 1e3, r.maxrss_kb / 1e3 / mb, limit_s,
           r.status ? "  FAILED" : "");
    show_log(r);
}

/* hbm view of a pickle (text, --json, --html) as its own process each, then the page in
 * Chromium. */
static void views(const char *hbm, const char *pk, const char *html, const char *dir, double mb) {
    char *view[] = {(char *)hbm, "view", (char *)pk, NULL};
    char *view_json[] = {(char *)hbm, "view", (char *)pk, "--json", NULL};
    char *view_html[] = {(char *)hbm, "view", (char *)pk, "--html", (char *)html, NULL};
    report("hbm view BIG.pickle", run(view), mb, 10);
    report("hbm view BIG.pickle --json", run(view_json), mb, 10);
    run_result rh = run(view_html);
    report("hbm view BIG.pickle --html", rh, mb, 10);
    printf("  %-30s %6.2f MB (target <= 20 MB)\n", "HTML page", file_mb(html));
    open_page(html, dir);
}

static double cpu_s(void) { /* user + sys of this process */
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Replay in this process, events per second of CPU time per configuration (the whole
 * hbm_replay call: pairing, replay, the first OOM's report and its checked advice): on
 * sim:80GiB, then on a device a quarter of the peak in use there (most allocations fail:
 * the first OOM is reported, the others counted); then on each device as `hbm replay
 * --allocators bfc,torch` runs them (the table with the bound and the twin, per
 * configuration) and `hbm replay --suggest` (its candidates, per configuration). */
static void replays(const char *pk) {
    hbm_trace *big;
    if (hbm_trace_load(pk, &big)) die("hbm_trace_load");
    static const char *configs[] = {"allocator=bfc", "allocator=torch"};
    uint64_t peak = 0;
    FILE *null = fopen("/dev/null", "w");
    if (!null) die("/dev/null");
    for (int quarter = 0; quarter < 2; quarter++) {
        char dev[64] = "sim:80GiB";
        if (quarter) snprintf(dev, sizeof dev, "sim:%" PRIu64 "MiB", (peak / 4 >> 20) + 1);
        const char *on = quarter ? ", 1/4 of the peak" : "";
        for (size_t c = 0; c < 2; c++) {
            hbm_replay_result res;
            char what[80];
            snprintf(what, sizeof what, "%s%s", configs[c], on);
            double c0 = cpu_s();
            hbm_status s = hbm_replay(big, dev, configs[c], &res);
            double cpu = cpu_s() - c0;
            if (s) {
                printf("  replay %-40s skipped: %s\n", what, res.error);
            } else {
                if (res.peak_in_use > peak) peak = res.peak_in_use;
                printf("  replay %-40s %7.2f M events/s (target >= 10)", what, (double)res.events / cpu / 1e6);
                if (res.ooms) printf(", %" PRIu64 " OOMs", res.ooms);
                printf("\n");
            }
            hbm_replay_result_release(&res);
        }
        char what[80];
        snprintf(what, sizeof what, "--allocators bfc,torch%s", on);
        double c0 = cpu_s();
        if (hbm_replay_run_write(big, dev, configs, 2, null, 0, NULL))
            printf("  replay %-40s failed: %s\n", what, hbm_last_error());
        else
            printf("  replay %-40s %7.2f M events/s per configuration (target >= 10)\n", what,
                   2.0 * (double)big->count / (cpu_s() - c0) / 1e6);
        hbm_torch_suggestion sg;
        snprintf(what, sizeof what, "--suggest%s", on);
        c0 = cpu_s();
        if (hbm_torch_suggest(big, dev, &sg))
            printf("  replay %-40s failed: %s\n", what, hbm_last_error());
        else
            printf("  replay %-40s %7.2f M events/s per configuration (%zu of them; target >= 10)\n", what,
                   (double)sg.n * (double)big->count / (cpu_s() - c0) / 1e6, sg.n);
    }
    fclose(null);
    hbm_trace_free(big);
}

int main(int argc, char **argv) {
    double target_mb = argc > 1 ? atof(argv[1]) : 1000;
    if (target_mb <= 0) {
        fprintf(stderr, "usage: bench_snapshot [MB]\n");
        return 2;
    }
    char hbm[4096], dir[1024], pk[1200], js[1200], html[1200];
    snprintf(hbm, sizeof hbm, "%s", argv[0]);
    char *slash = strrchr(hbm, '/');
    snprintf(slash ? slash + 1 : hbm, sizeof hbm - (size_t)(slash ? slash + 1 - hbm : 0), "hbm");
    if (access(hbm, X_OK)) {
        fprintf(stderr, "bench_snapshot: %s not found (build hbm first)\n", hbm);
        return 2;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/hbm-bench-snapshot-%d", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    if (mkdir(dir, 0700)) {
        fprintf(stderr, "bench_snapshot: mkdir %s: %s\n", dir, strerror(errno));
        return 2;
    }
    snprintf(pk, sizeof pk, "%s/big.pickle", dir);
    snprintf(js, sizeof js, "%s/big.json", dir);
    snprintf(html, sizeof html, "%s/big.html", dir);
    snprintf(run_log, sizeof run_log, "%s/stderr.log", dir);
    int keep = getenv("HBM_BENCH_KEEP") != NULL; /* keep the files (to profile hbm on them) */
    /* HBM_BENCH_LAYOUT=shared or =real: that layout only */
    const char *only = getenv("HBM_BENCH_LAYOUT");

    if (!only || !strcmp(only, "shared")) {
        /* about 122 bytes of pickle per event: aim at the size asked */
        uint64_t t0 = hbmi_now_ns();
        hbm_trace *t = generate((uint64_t)(target_mb * 1e6 / 122), 0);
        if (write_pickle(t, pk)) die("writing the pickle");
        double mb = file_mb(pk);
        printf("bench_snapshot: %zu events, %zu stacks, a %.0f MB pickle, frames shared through the memo (%.0f bytes "
               "per event; generated and written in %.1f s)\n", t->count, t->priv_->bt_count, mb, mb * 1e6 / (double)t->count,
               (double)(hbmi_now_ns() - t0) / 1e9);
        hbm_trace_free(t);
        views(hbm, pk, html, dir, mb);
        replays(pk);
        char kept[1300];
        snprintf(kept, sizeof kept, "%s/shared.pickle", dir);
        if (keep ? rename(pk, kept) : unlink(pk)) fprintf(stderr, "bench_snapshot: cannot move %s\n", pk);

        /* JSON: the same kind of history with every frame written out, about as many MB */
        t = generate((uint64_t)(target_mb * 1e6 / 2600), 0);
        if (write_json(t, js)) die("writing the JSON");
        hbm_trace_free(t);
        double jmb = file_mb(js);
        char *load_json[] = {hbm, "view", js, "--json", NULL};
        run_result rj = run(load_json);
        printf("  %-30s %6.2f s (CPU %5.2f s) %6.1f MB/s (target >= 100)  peak RSS %.2fx the file (%.0f MB JSON)%s\n",
               "hbm view BIG.json --json", rj.seconds, rj.cpu, jmb / rj.seconds, rj.maxrss_kb / 1e3 / jmb, jmb,
               rj.status ? "  FAILED" : "");
        show_log(rj);
        if (!keep) unlink(js);
    }

    if (!only || !strcmp(only, "real")) {
        /* frames written anew in every event, stacks of 40-80 frames: about 1,040 bytes per entry, 1.5 entries per event */
        uint64_t t0 = hbmi_now_ns();
        hbm_trace *t = generate((uint64_t)(target_mb * 1e6 / 1600), 1);
        size_t entries = 0;
        if (write_pickle_real(t, pk, &entries)) die("writing the pickle");
        double mb = file_mb(pk);
        printf("bench_snapshot: %zu entries (%zu events), %zu stacks of 40-80 frames, a %.0f MB pickle with frames "
               "written anew in every entry (%.0f bytes per entry; generated and written in %.1f s)\n", entries,
               t->count, t->priv_->bt_count, mb, mb * 1e6 / (double)entries, (double)(hbmi_now_ns() - t0) / 1e9);
        hbm_trace_free(t);
        views(hbm, pk, html, dir, mb);
        replays(pk);
        if (!keep) unlink(pk);
    }
    if (keep) {
        printf("  files kept in %s\n", dir);
        return 0;
    }
    unlink(html);
    unlink(run_log);
    rmdir(dir);
    return 0;
}
