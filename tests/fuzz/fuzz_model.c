/* libFuzzer harness: a model file (Tessera's JSON or a Hugging Face config.json, told apart by
 * ts_model_load) read from disk, as `tessera plan --model FILE` reads it. An accepted model must
 * count its parameters without undefined behaviour and round-trip through ts_model_to_json. */
#include <math.h>

#include "models/model.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    ts_error_clear();
    ts_model m;
    if (ts_model_load(path, &m) != TS_OK) {
        if (ts_error_message()[0] == '\0') fuzz_fail("a failed load left no message");
        return 0;
    }
    ts_param_count pc;
    ts_model_params(&m, &pc);
    for (int l = 0; l < m.layers && l < 4; l++) (void)ts_model_layer_params(&m, l);

    cJSON *j = ts_model_to_json(&m);
    if (j == NULL) fuzz_fail("ts_model_to_json");
    ts_model back;
    if (ts_model_from_json("roundtrip", j, &back) != TS_OK) fuzz_fail("model does not read back");
    if (memcmp(&m, &back, sizeof m) != 0) fuzz_fail("model reads back different");
    cJSON_Delete(j);
    return 0;
}
