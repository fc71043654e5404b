/* proto.c - XLA's protobuf inputs: XProf profiles (XSpace, *.xplane.pb, a profile directory)
 * and XLA's dumps (HloProto *.hlo_proto.pb, HloModuleProto *.hlo.pb), found by content.
 * The bytes are read by protobuf-c from the project's schemas (proto/hbm_xla.proto, proto/hbm_xplane.proto); each module
 * becomes the hbm_hlo_module the text parser builds (everything lives in the module's arena,
 * protobuf-c's own allocations included), with XLA's BufferAssignmentProto summed as JAX's
 * memory_analysis() sums it and its heap simulator trace replayed to its peak.
 * Without protobuf-c only the sniffing is compiled; reading says what is missing. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hlo/hlo_internal.h"

/* --- sniffing (always built) ---------------------------------------------------------------- */
const char *hbm_proto_kind_str(hbm_proto_kind k) {
    switch (k) {
    case HBM_PROTO_XSPACE: return "XProf profile (XSpace)";
    case HBM_PROTO_HLO_PROTO: return "xla.HloProto";
    case HBM_PROTO_HLO_MODULE: return "xla.HloModuleProto";
    case HBM_PROTO_PROFILE_DIR: return "profile directory";
    default: return "not a protobuf input";
    }
}

/* Serializers write fields in number order, so the first field tells the message: XSpace
 * starts with a plane (field 1) whose first field is its id or name; HloProto with its
 * module (field 1) whose first field is the module's name; HloModuleProto with that name,
 * printable text. A prefix with no control character is text (HLO, JSON, CSV). */
hbm_proto_kind hbm_proto_sniff(const void *data, size_t len) {
    const uint8_t *p = data;
    if (!p || !len) return HBM_PROTO_NONE;
    size_t k = len < 512 ? len : 512, i = 0;
    int text = 1;
    for (size_t j = 0; j < k && text; j++)
        if (p[j] < 0x20 && p[j] != '\n' && p[j] != '\r' && p[j] != '\t') text = 0;
    if (text) return HBM_PROTO_NONE;
    uint64_t tag, n;
    if (hbmi_varint_get(p, len, &i, &tag) <= 0 || (tag & 7) != 2 || hbmi_varint_get(p, len, &i, &n) <= 0) return HBM_PROTO_NONE;
    uint64_t field = tag >> 3;
    if (field == 3) return HBM_PROTO_HLO_PROTO;
    if (field == 2 || field == 4) return HBM_PROTO_XSPACE;
    if (field != 1) return HBM_PROTO_NONE;
    if (!n) return HBM_PROTO_XSPACE;
    size_t avail = len - i, m = n < avail ? (size_t)n : avail;
    if (m > 256) m = 256;
    if (!m) return HBM_PROTO_NONE;
    int printable = 1;
    for (size_t j = 0; j < m && printable; j++)
        if (p[i + j] < 0x20 || p[i + j] == 0x7f) printable = 0;
    if (printable) return HBM_PROTO_HLO_MODULE;
    uint8_t c0 = p[i];
    if (c0 == 0x0a) return HBM_PROTO_HLO_PROTO;
    if (c0 == 0x08 || c0 == 0x12 || c0 == 0x1a || c0 == 0x22 || c0 == 0x2a || c0 == 0x32) return HBM_PROTO_XSPACE;
    return HBM_PROTO_NONE;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int is_dir(const char *p) {
    struct stat st;
    return !stat(p, &st) && S_ISDIR(st.st_mode);
}

/* *.xplane.pb files in dir: their count and the first by name (into first). */
static size_t xplanes_in(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t n = 0;
    char best[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !ends_with(e->d_name, ".xplane.pb") || strlen(e->d_name) >= sizeof best) continue;
        if (!n || strcmp(e->d_name, best) < 0) snprintf(best, sizeof best, "%s", e->d_name);
        n++;
    }
    closedir(d);
    if (n && first) snprintf(first, cap, "%s/%s", dir, best);
    return n;
}

/* The latest run (greatest name: XProf names runs by their time) under dir holding
 * *.xplane.pb files. */
static size_t latest_run(const char *dir, char *first, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    char best[256] = "", sub[4096];
    size_t hosts = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof best) continue;
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        if (!is_dir(sub) || (best[0] && strcmp(e->d_name, best) <= 0)) continue;
        size_t h = xplanes_in(sub, NULL, 0);
        if (!h) continue;
        snprintf(best, sizeof best, "%s", e->d_name);
        hosts = h;
    }
    closedir(d);
    if (!hosts) return 0;
    snprintf(sub, sizeof sub, "%s/%s", dir, best);
    return xplanes_in(sub, first, cap);
}

/* A profile under dir: LOGDIR (LOGDIR/plugins/profile/RUN/), plugins/profile, or a run. */
size_t hbmi_proto_find_profile(const char *dir, char *first, size_t cap) {
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/plugins/profile", dir);
    size_t n = is_dir(sub) ? latest_run(sub, first, cap) : 0;
    if (!n) n = xplanes_in(dir, first, cap);
    if (!n) n = latest_run(dir, first, cap);
    return n;
}

hbm_proto_kind hbm_proto_path_kind(const char *path) {
    if (!path) return HBM_PROTO_NONE;
    if (is_dir(path)) return hbmi_proto_find_profile(path, NULL, 0) ? HBM_PROTO_PROFILE_DIR : HBM_PROTO_NONE;
    FILE *f = fopen(path, "rb");
    if (!f) return HBM_PROTO_NONE;
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return hbm_proto_sniff(buf, n);
}

hbm_status hbm_hlo_xla_stats(const hbm_hlo_module *m, hbm_xla_stats *out) {
    if (!m || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_hlo_xla_stats: NULL argument");
    if (!m->xla)
        return hbmi_error(HBM_ERR_NOT_AVAILABLE, "%s: no XLA buffer assignment (only a protobuf with an "
                          "xla.BufferAssignmentProto carries one)", m->path);
    *out = m->xla->st;
    return HBM_OK;
}

size_t hbm_hlo_xla_peak_buffers(const hbm_hlo_module *m, hbm_xla_buffer *out, size_t max) {
    if (!m || !m->xla || !out) return 0;
    size_t n = 0;
    for (; n < m->xla->n_peak && n < max; n++) {
        const hbmi_xla_lbuf *b = &m->xla->lbufs[m->xla->peak[n]];
        hbm_xla_buffer *o = &out[n];
        memset(o, 0, sizeof *o);
        o->size = b->size;
        o->id = b->id;
        o->instruction = o->opcode = "";
        if (b->comp >= 0) {
            const hbmi_instr *in = &m->comps[b->comp].ins[b->instr];
            o->instruction = in->name.p; /* NUL-terminated: protobuf-c's strings */
            o->opcode = in->opcode.p;
        }
        snprintf(o->shape_index, sizeof o->shape_index, "%s", b->index);
        o->allocation = b->alloc;
        o->offset = b->offset;
    }
    return n;
}


/* --- HLO text or protobuf, by content -------------------------------------------------------- */
static hbm_status parse_cb(const char *data, size_t len, const char *name, void *out) {
    return hbm_hlo_parse(data, len, name, out);
}

hbm_status hbm_hlo_open(const char *path, const char *module, hbm_hlo_module **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hlo: NULL argument");
    *out = NULL;
    if (hbm_proto_path_kind(path) != HBM_PROTO_NONE) {
        hbm_proto_file *f;
        hbm_status s = hbm_proto_open(path, &f);
        if (s) return s;
        size_t pick = 0; /* the largest */
        if (module) s = hbm_proto_find(f, module, &pick);
        if (!s) s = hbm_proto_load(f, pick, out);
        hbm_proto_close(f);
        return s;
    }
    if (module && *module)
        return hbmi_error(HBM_ERR_INVALID, "%s: HLO text holds one module: no module to choose ('%s')", path, module);
    if (is_dir(path))
        return hbmi_error(HBM_ERR_INVALID, "%s is a directory without a profile (no plugins/profile/RUN/*.xplane.pb, "
                          "no *.xplane.pb in it)", path);
    return hbmi_parse_file(path, parse_cb, out);
}
