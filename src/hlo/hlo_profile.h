/* src/hlo/hlo_profile.h - where a profile's files are, for the memory profile's reader
 * (src/trace/import/xprof_memory.c), which reads the same profiles as the HLO reader. */
#ifndef HBM_HLO_PROFILE_H
#define HBM_HLO_PROFILE_H

#include <stddef.h>

/* The profile under dir (LOGDIR, plugins/profile, a run): the number of hosts' *.xplane.pb
 * files in its latest run, the first of them by name into first (src/hlo/proto.c). */
size_t hbmi_proto_find_profile(const char *dir, char *first, size_t cap);

#endif
