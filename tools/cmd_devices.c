/* cmd_devices.c - hbm devices: the accelerators hbm knows, their memory and framework limits. */
#include <string.h>

#include "cli.h"

int cmd_devices(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is(argv[i], "-h", "--help")) {
            printf("Usage: hbm devices [--json]\n"
                   "\n"
                   "List the devices 'hbm plan --device NAME' knows: the memory the runtime reports\n"
                   "and the share the framework lets XLA use by default (JAX preallocates 75 %% on GPUs).\n"
                   "Names are case-insensitive; the aliases column lists other accepted spellings.\n"
                   "\n"
                   "Example:\n"
                   "  hbm devices\n"
                   "  hbm plan model.hlo --device h100\n");
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else {
            return cli_usage_error("devices", "unknown argument '%s'", argv[i]);
        }
    }
    size_t n = hbm_device_model_count();
    if (json) printf("[");
    else printf("%-12s %14s %18s %9s  %s\n", "NAME", "CAPACITY", "BYTES", "FRACTION", "NOTE");
    for (size_t i = 0; i < n; i++) {
        const hbm_device_model *d = hbm_device_model_at(i);
        char h[32];
        if (json)
            printf("%s\n  {\"name\": \"%s\", \"capacity_bytes\": %llu, \"default_fraction\": %.2f, \"aliases\": \"%s\"}",
                   i ? "," : "", d->name, (unsigned long long)d->capacity_bytes, d->default_fraction, d->aliases);
        else
            printf("%-12s %14s %18llu %9.2f  %s (aliases: %s)\n", d->name, hbm_size_human(d->capacity_bytes, h),
                   (unsigned long long)d->capacity_bytes, d->default_fraction, d->note, d->aliases);
    }
    if (json) printf("\n]\n");
    return 0;
}
