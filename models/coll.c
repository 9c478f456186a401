/* Names of the collective kinds (see coll.h). */
#include "models/coll.h"

#include <stddef.h>

const char *const ts_coll_names[] = {"all-reduce", "reduce-scatter", "all-gather", "all-to-all",
                                     "send-recv", NULL};
