/* load.c - open any supported trace by its content. */
#include <string.h>

#include "trace/trace_internal.h"

hbm_status hbm_trace_load_mem(const void *data, size_t len, const char *name, hbm_trace **out) {
    if (!data || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load: NULL argument");
    const unsigned char *p = data;
    if (len >= 8 && !memcmp(p, HBMI_TRACE_MAGIC, 8)) return hbm_trace_parse(data, len, name, out);
    if (len >= 1 && p[0] == 0x80) return hbm_trace_parse_torch_pickle(data, len, name, out);
    size_t i = 0;
    while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
    if (i < len && p[i] == '{') return hbm_trace_parse_torch_json(data, len, name, out);
    if (len >= 6 && !memcmp(p + i, "Thread", 6)) return hbm_trace_parse_rmm_csv(data, len, name, out);
    return hbmi_error(HBM_ERR_PARSE,
                      "%s: not a recognized trace (expected an hbm trace \"HBMTRACE\", a PyTorch snapshot "
                      "pickle or JSON, or an RMM log CSV starting \"Thread,Time,Action\")",
                      name ? name : "input");
}

hbm_status hbm_trace_load(const char *path, hbm_trace **out) {
    if (!path || !out) return hbmi_error(HBM_ERR_INVALID, "hbm_trace_load: NULL argument");
    char *data;
    size_t len;
    hbm_status s = hbmi_read_file(path, &data, &len);
    if (s) return s;
    s = hbm_trace_load_mem(data, len, path, out);
    hbmi_free(data);
    return s;
}
