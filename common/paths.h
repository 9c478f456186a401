/* Where Tessera finds its zoo (models/llm, models/systems).
 *
 * $TESSERA_DATA wins; otherwise the directory compiled in as TS_DATA_DIR (the source tree for
 * `make`, $(PREFIX)/share/tessera for `make install`). */
#ifndef TS_PATHS_H
#define TS_PATHS_H

#include <stddef.h>

#include "common/status.h"

const char *ts_data_dir(void);

/* Resolves `name_or_path` for a zoo folder ("models/llm"): a name without '/' or ".json" becomes
 * <data>/<folder>/<name>.json; anything else is taken as a path. An unknown zoo name is
 * TS_ERR_INPUT listing the folder to look in. */
ts_status ts_zoo_resolve(const char *folder, const char *name_or_path, char *out, size_t cap);

/* Names (file stems) of the .json files in <data>/<folder>, sorted; returns the count. */
int ts_zoo_list(const char *folder, char names[][64], int cap);

#endif
