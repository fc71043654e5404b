/* json.c - the library's one JSON string writer (core/internal.h). */
#include "core/internal.h"

void hbmi_json_write_str(FILE *f, const char *s, unsigned how) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n' && (how & HBMI_JSON_NL)) fputs("\\n", f);
        else if (*p < 0x20 || ((how & HBMI_JSON_SCRIPT) && (*p == '<' || *p == '>' || *p == '&'))) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}
