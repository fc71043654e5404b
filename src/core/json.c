/* json.c - the library's one JSON string writer (core/internal.h). */
#include <string.h>

#include "core/internal.h"

void hbmi_json_write_strn(FILE *f, const char *s, size_t n, unsigned how) {
    fputc('"', f);
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; s && i < n; i++) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n' && (how & HBMI_JSON_NL)) fputs("\\n", f);
        else if (c < 0x20 || ((how & HBMI_JSON_SCRIPT) && (c == '<' || c == '>' || c == '&')) ||
                 (c == 0x7f && (how & HBMI_JSON_ETAG)))
            fprintf(f, "\\u%04x", c);
        else if (c == '/' && i && p[i - 1] == '<' && (how & HBMI_JSON_ETAG)) fputs("\\/", f);
        else fputc(c, f);
    }
    fputc('"', f);
}

void hbmi_json_write_str(FILE *f, const char *s, unsigned how) { hbmi_json_write_strn(f, s, s ? strlen(s) : 0, how); }
