/* cmd_devices.c - hbm devices: the accelerators hbm knows, their memory and framework limits. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cmd_devices(int argc, char **argv) {
    int json = 0;
    size_t width = CLI_WIDTH;
    const cli_opt opts[] = {
        {.name = "--json", .kind = CLI_FLAG, .dest = &json, .help = "the table as JSON"},
        CLI_OPT_WIDTH(&width),
    };
    const cli_command cmd = {
        .name = "devices",
        .about = "List the devices 'hbm plan --device NAME' knows: the memory the runtime reports\n"
                 "and the share the framework lets XLA use by default (JAX preallocates 75 % on GPUs).\n"
                 "Names are case-insensitive; 'also' lists other accepted spellings.",
        .opts = opts,
        .nopts = CLI_N(opts),
        .exits = CLI_EXITS_DONE,
        .examples = "Example:\n"
                    "  hbm devices\n"
                    "  hbm plan model.hlo --device h100",
    };
    cli_args args;
    int rc = cli_parse(&cmd, argc, argv, &args);
    if (rc >= 0) return rc;
    size_t n = hbm_device_model_count();
    char *text = NULL;
    size_t len = 0;
    FILE *out = json ? stdout : open_memstream(&text, &len); /* text: fitted to --width */
    if (!out) return cli_fail("devices", HBM_ERR_NOMEM);
    if (json) printf("[");
    else fprintf(out, "%-12s %10s %14s %8s  %s\n", "NAME", "CAPACITY", "BYTES", "FRACTION", "NOTE");
    for (size_t i = 0; i < n; i++) {
        const hbm_device_model *d = hbm_device_model_at(i);
        char h[32];
        if (json)
            printf("%s\n  {\"name\": \"%s\", \"capacity_bytes\": %llu, \"default_fraction\": %.2f, \"aliases\": \"%s\"}",
                   i ? "," : "", d->name, (unsigned long long)d->capacity_bytes, d->default_fraction, d->aliases);
        else
            fprintf(out, "%-12s %10s %14llu %8.2f  %s\n%-12s also: %s\n", d->name, hbm_size_human(d->capacity_bytes, h),
                    (unsigned long long)d->capacity_bytes, d->default_fraction, d->note, "", d->aliases);
    }
    if (json) {
        printf("\n]\n");
        return 0;
    }
    if (fclose(out)) return cli_fail("devices", HBM_ERR_NOMEM);
    cli_write_fitted(stdout, text, len, width);
    free(text);
    return 0;
}
