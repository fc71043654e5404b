/* sniff.c - is a file an HLO module's text? (hbm view, hbm.load choose the plan's view) */
#include <stdio.h>
#include <string.h>

#include "hbm/hlo.h"

int hbm_hlo_file_is_text(const char *path) {
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) return 0;
    char buf[256];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t i = 0;
    while (i < n && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n')) i++;
    return n - i >= 9 && !memcmp(buf + i, "HloModule", 9);
}
