/* libFuzzer harness: the layout text form (ts_layout_parse) and --fix pins (ts_pins_parse). An
 * accepted layout must print (ts_layout_format) to text that parses back to the same layout. */
#include "program/layout.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstr(data, size);
    ts_error_clear();
    ts_pins pins;
    (void)ts_pins_parse("--fix", text, &pins);
    ts_error_clear();
    ts_layout l;
    if (ts_layout_parse("layout", text, &l) == TS_OK) {
        char buf[512];
        int len = ts_layout_format(&l, buf, sizeof buf);
        if (len < 0 || (size_t)len >= sizeof buf) fuzz_fail("layout text does not fit 512 bytes");
        ts_layout back;
        if (ts_layout_parse("roundtrip", buf, &back) != TS_OK) fuzz_fail("layout does not read back");
        if (memcmp(&l, &back, sizeof l) != 0) fuzz_fail("layout reads back different");
    }
    free(text);
    return 0;
}
