/* libFuzzer harness: a Hugging Face config.json given straight to ts_model_from_hf (so every
 * input takes the Hugging Face path, whatever its keys). An accepted config must round-trip
 * through Tessera's own model JSON, as a plan file embeds it. */
#include "common/json.h"
#include "models/hf.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    ts_error_clear();
    cJSON *root = NULL;
    if (ts_json_parse("config.json", text, &root) == TS_OK) {
        ts_model m;
        if (ts_model_from_hf("config.json", root, &m) == TS_OK) {
            ts_param_count pc;
            ts_model_params(&m, &pc);
            cJSON *j = ts_model_to_json(&m);
            if (j == NULL) fuzz_fail("ts_model_to_json");
            ts_model back;
            ts_error_clear();
            if (ts_model_from_json("roundtrip", j, &back) != TS_OK)
                fuzz_fail("Hugging Face model does not read back from Tessera's JSON");
            if (memcmp(&m, &back, sizeof m) != 0) fuzz_fail("model reads back different");
            cJSON_Delete(j);
        }
    }
    cJSON_Delete(root);
    free(text);
    return 0;
}
