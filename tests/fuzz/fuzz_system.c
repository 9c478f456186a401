/* libFuzzer harness: a system spec (models/systems schema) parsed from memory. An accepted
 * system must give finite efficiencies and usable bytes and round-trip through
 * ts_system_to_json. */
#include <math.h>

#include "common/json.h"
#include "models/system.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    ts_error_clear();
    cJSON *root = NULL;
    if (ts_json_parse("system.json", text, &root) == TS_OK) {
        ts_system s;
        if (ts_system_from_json("system.json", root, &s) == TS_OK) {
            static const double flops[] = {0, 1, 1e6, 1e9, 1e12, 1e18, 1e30};
            for (size_t i = 0; i < sizeof flops / sizeof flops[0]; i++) {
                double e = ts_eff_at(&s.gemm_eff, flops[i]);
                if (!(e > 0 && e <= 1)) fuzz_fail("GEMM efficiency outside (0, 1]");
            }
            if (!(ts_system_usable_bytes(&s) > 0)) fuzz_fail("usable bytes <= 0");
            cJSON *j = ts_system_to_json(&s);
            if (j == NULL) fuzz_fail("ts_system_to_json");
            ts_system back;
            if (ts_system_from_json("roundtrip", j, &back) != TS_OK)
                fuzz_fail("system does not read back");
            if (memcmp(&s, &back, sizeof s) != 0) fuzz_fail("system reads back different");
            cJSON_Delete(j);
        }
    }
    cJSON_Delete(root);
    free(text);
    return 0;
}
