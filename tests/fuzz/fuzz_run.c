/* libFuzzer harness: a run summary (tessera run --json) read by ts_run_summary_load, as
 * `tessera report --run` does. An accepted summary names a layout whose keys and values parse
 * (sizes left out are 1) with the rank count it states, finite figures, and reads the same
 * twice. */
#include <math.h>

#include "program/layout.h"
#include "program/ranks.h"
#include "reports/measured.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    ts_error_clear();
    ts_run_summary a, b;
    if (ts_run_summary_load(path, &a) != TS_OK) return 0;
    ts_pins pins;
    if (ts_pins_parse("layout", a.layout, &pins) != TS_OK) fuzz_fail("accepted layout does not parse");
    ts_layout l = pins.value;
    l.dp = l.dp ? l.dp : 1, l.tp = l.tp ? l.tp : 1, l.pp = l.pp ? l.pp : 1, l.cp = l.cp ? l.cp : 1;
    if (a.ranks && ts_rank_count(&l) != a.ranks) fuzz_fail("ranks differ from the layout's");
    if (!isfinite(a.step_median_s) || !isfinite(a.loss_first) || !isfinite(a.loss_last))
        fuzz_fail("non-finite figure accepted");
    if (ts_run_summary_load(path, &b) != TS_OK || memcmp(&a, &b, sizeof a) != 0)
        fuzz_fail("the summary reads differently twice");
    return 0;
}
