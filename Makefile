# Tessera — one flat Makefile.
#   make            build libtessera.a and build/tessera
#   make test       build and run the Criterion tests
#   make check-export  exports validated by megatron-core, Megatron-Bridge, DeepSpeed (PyPI venv)
#   make check      the same tests under AddressSanitizer + UBSan (separate build dir)
#   make fuzz       FUZZ_SECONDS=60 per libFuzzer harness in tests/fuzz/ (clang, build-fuzz/)
#   make valgrind   memcheck over a plan and a sim example
#   make bench      build and run the benchmarks in bench/
#   make demo       install missing packages, build, answer the 70B-on-64-GPUs question
#   make install    PREFIX=/usr/local: binary and zoo
# Knobs (0/1): CUDA ASAN UBSAN DEBUG WERROR.

CC      ?= cc
PREFIX  ?= /usr/local
CUDA    ?= 0
ASAN    ?= 0
UBSAN   ?= 0
DEBUG   ?= 0
WERROR  ?= 0
BUILD   ?= build

# The zoo is read from the source tree unless installed (see common/paths.h).
DATA_DIR ?= $(CURDIR)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
           -Wpointer-arith -Wcast-qual -Wundef
CFLAGS  ?= $(if $(filter 1,$(DEBUG)),-O0 -g3,-O2 -g)
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -I. -MMD -MP -DTS_DATA_DIR='"$(DATA_DIR)"'
LDLIBS  := -lcjson -lglpk -lopenblas -lm

MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
CFLAGS  += $(MPI_CFLAGS) -I/usr/include/x86_64-linux-gnu/openblas-pthread
LDLIBS  += $(MPI_LIBS)

SAN :=
ifeq ($(ASAN),1)
SAN += -fsanitize=address -fno-omit-frame-pointer
endif
ifeq ($(UBSAN),1)
SAN += -fsanitize=undefined -fno-sanitize-recover=undefined
endif
# FUZZ=1 (set by `make fuzz`, clang only): coverage instrumentation for libFuzzer.
ifeq ($(FUZZ),1)
SAN += -fsanitize=fuzzer-no-link
endif
ifeq ($(WERROR),1)
CFLAGS += -Werror
endif
CFLAGS  += $(SAN)
LDFLAGS += $(SAN)

LIB_DIRS := common models planner sim exec reports
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)

# CUDA backend: .cu files in exec/, compiled only with CUDA=1 (the Makefile probes nvcc).
NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)
CU_SRCS := $(wildcard exec/*.cu)
ifeq ($(CUDA),1)
ifeq ($(wildcard $(NVCC)),)
$(error CUDA=1 but nvcc was not found (looked for $(NVCC)))
endif
$(info ✓ nvcc found ($(NVCC)), building CUDA backend: $(words $(CU_SRCS)) .cu file(s))
CU_OBJS := $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
CFLAGS  += -DTS_CUDA=1 -I/usr/local/cuda/include
LDLIBS  += -L/usr/local/cuda/lib64 -lcudart -lcublas -lnccl -lstdc++
NVFLAGS := -O2 -MMD -MP -I. -I/usr/local/cuda/include $(filter -I%,$(MPI_CFLAGS)) -DTS_CUDA=1 \
           -Xcompiler -Wall,-Wextra,-Wshadow $(if $(filter 1,$(WERROR)),-Werror all-warnings)
else
CU_OBJS :=
endif

LIB  := $(BUILD)/libtessera.a
BIN  := $(BUILD)/tessera
CLI_SRCS := $(wildcard cli/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
TEST_SRCS := $(wildcard tests/*.c)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/%.o)
TEST_BIN  := $(BUILD)/tessera-tests
# Criterion registers tests as structs in a linker section and walks them as an array; ASan's
# redzones around globals would pad that array (a "global-buffer-overflow" inside libcriterion at
# start-up), so the tests' own globals are left uninstrumented.
ifeq ($(ASAN),1)
$(TEST_OBJS): CFLAGS += --param=asan-globals=0
endif
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:%.c=$(BUILD)/%)

.PHONY: all test test-golden check-export check fuzz fuzz-bins valgrind bench demo install deps clean
all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) $(CU_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BIN): $(CLI_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $(CLI_OBJS) $(LIB) $(LDLIBS) -o $@

# -lutil: forkpty, for the tests that run the CLI on a pseudo-terminal (in libc since glibc 2.34,
# which keeps an empty libutil for such links).
$(TEST_BIN): $(TEST_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $(TEST_OBJS) $(LIB) $(LDLIBS) -lcriterion -lpng -lutil -o $@

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

# Tests find the CLI and the zoo through these variables (tests/helpers.h).
test: $(BIN) $(TEST_BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) $(TEST_BIN) -j2

# The golden outputs alone (tests/golden/cases.txt); TESSERA_GOLDEN_UPDATE=1 rewrites them.
test-golden: $(BIN) $(TEST_BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) $(TEST_BIN) --filter 'golden/*'

# Exports checked by megatron-core, Megatron-Bridge and DeepSpeed themselves, installed from PyPI
# into build/export-venv on first use (scripts/check-export.sh; minutes, several GB).
check-export: $(BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) bash scripts/check-export.sh

check:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build-check ASAN=1 UBSAN=1 DEBUG=1 test

# Fuzzing with libFuzzer (clang): tests/fuzz/NAME.c, seeds in tests/fuzz/corpus/NAME/. Each
# harness runs FUZZ_SECONDS under ASan + UBSan; what it learns goes to build-fuzz/corpus/NAME/,
# crashes to build-fuzz/crash-NAME-*. The first crash stops the run (exit status non-zero).
FUZZ_SECONDS ?= 60
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang ASAN=1 UBSAN=1 FUZZ=1 fuzz-bins
	@for n in $(FUZZ_NAMES); do \
	  echo "== $$n: $(FUZZ_SECONDS) s, log build-fuzz/$$n.log"; mkdir -p build-fuzz/corpus/$$n; \
	  if build-fuzz/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	       -print_final_stats=1 -artifact_prefix=build-fuzz/crash-$$n- \
	       build-fuzz/corpus/$$n tests/fuzz/corpus/$$n >build-fuzz/$$n.log 2>&1; then \
	    grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss)' build-fuzz/$$n.log; \
	  else tail -n 40 build-fuzz/$$n.log; echo "fuzz: $$n failed (input in build-fuzz/crash-$$n-*)"; exit 1; fi; \
	done

fuzz-bins: $(FUZZ_NAMES:%=$(BUILD)/fuzz/%)

$(BUILD)/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer $< $(LIB) $(LDLIBS) -o $@

# valgrind (memcheck) over a `plan` and a `sim` example; any error fails the target.
VALGRIND := valgrind --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite -q
valgrind: $(BIN)
	TESSERA_DATA=$(CURDIR) $(VALGRIND) ./$(BIN) plan --model llama2-70b --system h100-sxm-dgx --gpus 64 --top 3 >/dev/null
	TESSERA_DATA=$(CURDIR) $(VALGRIND) ./$(BIN) sim --model llama2-7b --system h100-sxm-dgx --gpus 8 --global-batch 16 --fix tp=2,pp=2 --json >/dev/null

bench: $(BIN) $(BENCH_BINS)
	@for b in $(BENCH_BINS); do echo "== $$b"; TESSERA_DATA=$(CURDIR) $$b || exit 1; done
	@echo "== tessera validate (3 passes of calibrate + the layout matrix; simulated vs measured)"
	./$(BIN) validate --repeat 3 -o $(BUILD)/validation.json

deps:
	bash scripts/deps.sh

demo: deps
	$(MAKE) all
	./$(BIN) plan --model llama2-70b --system h100-sxm-dgx --gpus 64 --global-batch 1024 --seq 4096

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/tessera/models
	$(MAKE) BUILD=$(BUILD)-install DATA_DIR=$(PREFIX)/share/tessera all
	install -m 755 $(BUILD)-install/tessera $(DESTDIR)$(PREFIX)/bin/tessera
	cp -r models/llm models/systems $(DESTDIR)$(PREFIX)/share/tessera/models/

clean:
	rm -rf build build-check build-install build-fuzz

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(CU_OBJS:.o=.d)
