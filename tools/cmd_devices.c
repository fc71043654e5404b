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
    hbm_status s = hbm_device_models_write(stdout, json, width); /* text: fitted to --width */
    return s ? cli_fail("devices", s) : 0;
}
