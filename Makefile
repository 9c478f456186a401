# Tessera — one flat Makefile.
#   make            build libtessera.a and build/tessera
#   make test       build and run the Criterion tests (what CI runs)
#   make test-fast  the tests that start no MPI ranks and need no GPU (tests/README.md)
#   make test-golden  the golden outputs alone (TESSERA_GOLDEN_UPDATE=1 rewrites them)
#   make check-export  exports validated by megatron-core, Megatron-Bridge, DeepSpeed (PyPI venv)
#   make check-docs  re-runs the commands README.md and docs/ show; what they show must come out
#   make check      the same tests under AddressSanitizer + UBSan with float-cast-overflow (clang when installed, build-check/)
#   make fuzz       FUZZ_SECONDS=60 per libFuzzer harness in tests/fuzz/ (clang, build-fuzz/)
#   make valgrind   memcheck over a plan and a sim example
#   make bench      build and run the benchmarks in bench/
#   make demo       install missing packages, build, answer the 70B-on-64-GPUs question
#   make install    PREFIX=/usr/local: binary and zoo
#   make deps       install the Debian packages that are missing (scripts/deps.sh)
# Knobs (0/1): CUDA ASAN UBSAN DEBUG WERROR LTO. CUDA=1 reads CUDA_HOME (default /usr/local/cuda) and
# CUDA_ARCH (compute capabilities, default "80 90").

CC      ?= cc
PREFIX  ?= /usr/local
CUDA    ?= 0
ASAN    ?= 0
UBSAN   ?= 0
DEBUG   ?= 0
WERROR  ?= 0
BUILD   ?= build
PKG_CONFIG ?= pkg-config

# The zoo is read from the source tree unless installed (see common/paths.h).
DATA_DIR ?= $(CURDIR)

WARN    := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla \
           -Wpointer-arith -Wcast-qual -Wundef
CFLAGS  ?= $(if $(filter 1,$(DEBUG)),-O0 -g3,-O2 -g)
CFLAGS  += -std=c11 -D_GNU_SOURCE $(WARN) -I. -MMD -MP -DTS_DATA_DIR='"$(DATA_DIR)"'

# --- Probing the libraries -----------------------------------------------------------------------
# Each library through pkg-config, else (GLPK has no .pc file on Debian; any of them may lack one
# elsewhere) a header check with the compiler and the plain -l flag; MPI else through
# `mpicc --showme`. A found part prints "✓ NAME VERSION", a missing one "✗ NAME: ..." with the
# package that gives it, and the build stops. The lines are printed by the top-level make only
# (MAKELEVEL 0; TS_PROBE_SHOW=1 forces them), and nothing is probed for clean, deps and demo (demo
# runs deps first; its inner make probes). Criterion and libpng only for the test targets.
GOALS        := $(or $(MAKECMDGOALS),all)
PROBE        := $(if $(filter-out clean deps demo,$(GOALS)),1)
PROBE_TESTS  := $(if $(filter test test-fast test-golden check %/tessera-tests,$(GOALS)),1)
PROBE_SHOW   := $(if $(filter 0,$(MAKELEVEL)),1,$(filter 1,$(TS_PROBE_SHOW)))
PROBE_GET    := run `make deps` (or `bash scripts/deps.sh`)
PROBE_MISSING :=

# $(call pc_find,names): the first pkg-config package of `names` that is installed.
pc_find  = $(firstword $(foreach p,$1,$(if $(shell $(PKG_CONFIG) --exists '$p' 2>/dev/null && echo y),$p)))
# $(call hdr_ok,header): y when `#include <header>` preprocesses with $(CC).
hdr_ok   = $(shell printf '\043include <%s>\n' '$1' | $(CC) -E -x c - >/dev/null 2>&1 && echo y)
# $(call hdr_expr,header,expression): the expression (of the header's macros) as preprocessed.
hdr_expr = $(subst $() ,,$(shell printf '\043include <%s>\n%s\n' '$1' '$2' | $(CC) -E -P -x c - 2>/dev/null | tail -n 1))

# $(call probe,ID): sets ID_CFLAGS, ID_LIBS from ID_PC (pkg-config names), else from ID_HDR and
# ID_LIB (header check); prints the found line or the missing line (ID_NAME, ID_DEB: package).
define probe
$(1)_PKG := $$(call pc_find,$$($(1)_PC))
ifneq ($$($(1)_PKG),)
$(1)_CFLAGS := $$(shell $$(PKG_CONFIG) --cflags $$($(1)_PKG))
$(1)_LIBS   := $$(shell $$(PKG_CONFIG) --libs $$($(1)_PKG))
$(1)_FOUND  := $$($(1)_NAME) $$(shell $$(PKG_CONFIG) --modversion $$($(1)_PKG))
else ifeq ($$(call hdr_ok,$$($(1)_HDR)),y)
$(1)_CFLAGS :=
$(1)_LIBS   := $$($(1)_LIB)
$(1)_FOUND  := $$($(1)_NAME) $$(if $$($(1)_VER),$$(call hdr_expr,$$($(1)_HDR),$$($(1)_VER)) )(<$$($(1)_HDR)>, $$($(1)_LIB); no pkg-config file)
else
PROBE_MISSING += $$($(1)_NAME)
$$(info ✗ $$($(1)_NAME) not found (no pkg-config $$($(1)_PC), no <$$($(1)_HDR)>): install $$($(1)_DEB) — $$(PROBE_GET))
endif
ifneq ($$($(1)_FOUND),)
$$(if $$(PROBE_SHOW),$$(info ✓ $$($(1)_FOUND)))
endif
endef

CJSON_NAME := cJSON
CJSON_PC   := libcjson
CJSON_HDR  := cjson/cJSON.h
CJSON_LIB  := -lcjson
CJSON_VER  := CJSON_VERSION_MAJOR.CJSON_VERSION_MINOR.CJSON_VERSION_PATCH
CJSON_DEB  := libcjson-dev
GLPK_NAME  := GLPK
GLPK_PC    := glpk
GLPK_HDR   := glpk.h
GLPK_LIB   := -lglpk
GLPK_VER   := GLP_MAJOR_VERSION.GLP_MINOR_VERSION
GLPK_DEB   := libglpk-dev
BLAS_NAME  := OpenBLAS
BLAS_PC    := openblas
BLAS_HDR   := cblas.h
BLAS_LIB   := -lopenblas
BLAS_DEB   := libopenblas-dev
CRIT_NAME  := Criterion
CRIT_PC    := criterion
CRIT_HDR   := criterion/criterion.h
CRIT_LIB   := -lcriterion
CRIT_DEB   := libcriterion-dev
PNG_NAME   := libpng
PNG_PC     := libpng
PNG_HDR    := png.h
PNG_LIB    := -lpng
PNG_DEB    := libpng-dev

ifeq ($(PROBE),1)
$(eval $(call probe,CJSON))
$(eval $(call probe,GLPK))
$(eval $(call probe,BLAS))
# MPI: Open MPI's pkg-config files (ompi-c, or the alternatives' mpi), else mpicc --showme.
MPI_PKG := $(call pc_find,ompi-c mpi)
ifneq ($(MPI_PKG),)
MPI_CFLAGS := $(shell $(PKG_CONFIG) --cflags $(MPI_PKG))
MPI_LIBS   := $(shell $(PKG_CONFIG) --libs $(MPI_PKG))
MPI_FOUND  := MPI $(shell $(PKG_CONFIG) --modversion $(MPI_PKG)) ($(MPI_PKG))
else ifneq ($(shell mpicc --showme:link 2>/dev/null),)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
MPI_FOUND  := MPI $(shell mpicc --showme:version 2>/dev/null | sed -n 's/^mpicc: \([^ ]* [^ ]* [^ ]*\).*/\1/p') (mpicc --showme)
else
PROBE_MISSING += MPI
$(info ✗ MPI not found (no pkg-config ompi-c or mpi, no mpicc): install libopenmpi-dev and openmpi-bin — $(PROBE_GET))
endif
ifneq ($(MPI_FOUND),)
$(if $(PROBE_SHOW),$(info ✓ $(MPI_FOUND)))
endif
ifeq ($(PROBE_TESTS),1)
$(eval $(call probe,CRIT))
$(eval $(call probe,PNG))
# The CLI starts mpirun for `run`, `validate` and `calibrate`: the mpi suites need it.
ifeq ($(shell command -v mpirun 2>/dev/null),)
PROBE_MISSING += mpirun
$(info ✗ mpirun not found on the PATH (the tests' MPI runs start it): install openmpi-bin — $(PROBE_GET))
endif
endif
ifneq ($(strip $(PROBE_MISSING)),)
$(error missing: $(strip $(PROBE_MISSING)) — $(PROBE_GET), then make again)
endif
endif

# Dependencies' include folders as -isystem: their headers' warnings are not ours (WERROR=1).
dep_cflags = $(patsubst -I%,-isystem %,$1)
CFLAGS  += $(call dep_cflags,$(CJSON_CFLAGS) $(GLPK_CFLAGS) $(BLAS_CFLAGS) $(MPI_CFLAGS))
LDLIBS  := $(CJSON_LIBS) $(GLPK_LIBS) $(BLAS_LIBS) $(MPI_LIBS) -lm

SAN :=
ifeq ($(ASAN),1)
SAN += -fsanitize=address -fno-omit-frame-pointer
endif
# float-cast-overflow (a double outside the target integer's range converted: 1e300 to int) is
# named explicitly: clang's -fsanitize=undefined holds it, gcc's leaves it out.
ifeq ($(UBSAN),1)
SAN += -fsanitize=undefined,float-cast-overflow -fno-sanitize-recover=undefined,float-cast-overflow
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
# Link-time optimisation (GCC; LTO=0 turns it off): the planner's search and the simulator call
# small functions across files (planner/cost.c, models/system.c, program/recipe.c) millions of
# times, and only the link sees both sides to inline them (docs/benchmarks.md: 8.7% fewer
# instructions in plan_speed). Off for debug, sanitizer and fuzz builds, which are not timed.
CC_IS_GCC := $(if $(findstring Free Software Foundation,$(shell $(CC) --version 2>/dev/null)),1)
LTO ?= $(if $(filter 1,$(DEBUG) $(ASAN) $(UBSAN) $(FUZZ)),0,1)
ifeq ($(LTO)$(CC_IS_GCC),11)
CFLAGS  += -flto=auto
LDFLAGS += -flto=auto
AR      := gcc-ar
endif

LIB_DIRS := common models program planner sim exec reports
LIB_SRCS := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o)

# CUDA backend: .cu files in exec/, compiled only with CUDA=1 by $(CUDA_HOME)/bin/nvcc, for each
# compute capability in CUDA_ARCH (SASS), plus PTX of the highest so that newer GPUs JIT it.
CUDA_HOME ?= /usr/local/cuda
CUDA_ARCH ?= 80 90
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CU_SRCS   := $(wildcard exec/*.cu)
ifeq ($(CUDA),1)
ifeq ($(PROBE)$(wildcard $(NVCC)),1)
$(error CUDA=1 but nvcc was not found at $(NVCC): set CUDA_HOME (now $(CUDA_HOME)) to the CUDA toolkit)
endif
CUDA_ARCH_TOP := $(lastword $(shell printf '%s\n' $(CUDA_ARCH) | sort -n))
CUDA_GENCODE  := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                 -gencode arch=compute_$(CUDA_ARCH_TOP),code=compute_$(CUDA_ARCH_TOP)
ifeq ($(PROBE)$(PROBE_SHOW),11)
$(info ✓ CUDA $(shell $(NVCC) --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p') ($(NVCC)), sm $(CUDA_ARCH) + PTX $(CUDA_ARCH_TOP): $(words $(CU_SRCS)) .cu file(s))
endif
CU_OBJS := $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
CFLAGS  += -DTS_CUDA=1 -isystem $(CUDA_HOME)/include
LDLIBS  += -L$(CUDA_HOME)/lib64 -lcudart -lcublas -lcublasLt -lnccl -lstdc++
NVFLAGS := -O2 -MMD -MP -I. -I$(CUDA_HOME)/include $(filter -I%,$(MPI_CFLAGS)) -DTS_CUDA=1 $(CUDA_GENCODE) \
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
# (gcc: --param=asan-globals=0; clang: the same switch of LLVM's ASan pass.)
ifeq ($(ASAN),1)
ifneq ($(findstring clang,$(shell $(CC) --version 2>/dev/null | head -n 1)),)
$(TEST_OBJS): CFLAGS += -mllvm -asan-globals=0
else
$(TEST_OBJS): CFLAGS += --param=asan-globals=0
endif
endif
$(TEST_OBJS): CFLAGS += $(call dep_cflags,$(CRIT_CFLAGS) $(PNG_CFLAGS))
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:%.c=$(BUILD)/%)

.PHONY: all test test-fast test-golden check-export check-docs check fuzz fuzz-bins valgrind bench demo install deps clean
all: $(BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS) $(CU_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && $(AR) rcs $@ $^

$(BIN): $(CLI_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $(CLI_OBJS) $(LIB) $(LDLIBS) -o $@

# -lutil: forkpty, for the tests that run the CLI on a pseudo-terminal (in libc since glibc 2.34,
# which keeps an empty libutil for such links).
$(TEST_BIN): $(TEST_OBJS) $(LIB)
	$(CC) $(LDFLAGS) $(TEST_OBJS) $(LIB) $(LDLIBS) $(CRIT_LIBS) $(PNG_LIBS) -lutil -o $@

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CC) $(LDFLAGS) $< $(LIB) $(LDLIBS) -o $@

# Tests find the CLI and the zoo through these variables (tests/helpers.h). TEST_ARGS: more
# Criterion options (e.g. --tap=FILE, --verbose) for test, test-fast and test-golden.
test: $(BIN) $(TEST_BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) $(TEST_BIN) -j2 $(TEST_ARGS)

# The suites that start no MPI ranks (no mpirun: not `mpi`, not validate's runs) and need no GPU
# (not `cuda_gpu`): a Criterion --filter pattern (extended glob) over "suite/test" (tests/README.md).
TEST_FAST_FILTER := @(!(mpi|validate|cuda_gpu)/*|validate/bad_flags)
test-fast: $(BIN) $(TEST_BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) $(TEST_BIN) -j2 --filter '$(TEST_FAST_FILTER)' $(TEST_ARGS)

# The golden outputs alone (tests/golden/cases.txt); TESSERA_GOLDEN_UPDATE=1 rewrites them.
test-golden: $(BIN) $(TEST_BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) $(TEST_BIN) --filter 'golden/*' $(TEST_ARGS)

# Exports checked by megatron-core, Megatron-Bridge and DeepSpeed themselves, installed from PyPI
# into build/export-venv on first use (scripts/check-export.sh; minutes, several GB).
check-export: $(BIN)
	TESSERA_BIN=$(abspath $(BIN)) TESSERA_DATA=$(CURDIR) bash scripts/check-export.sh

# The commands README.md and docs/ show, re-run: every output line shown must still come out
# (scripts/check-docs.py). tests/data/docs/stale.md shows a stale figure and repeated.md a line twice
# that comes out once, which the check must catch; tests/data/docs/updatable.md one that --update
# must replace with the command's line.
check-docs: $(BIN) $(BUILD)/bench/planner_accuracy $(BUILD)/bench/fp8_gemms $(BUILD)/bench/gemm_transfer
	TESSERA_BIN=$(abspath $(BIN)) python3 scripts/check-docs.py
	@if TESSERA_BIN=$(abspath $(BIN)) python3 scripts/check-docs.py tests/data/docs/stale.md >/dev/null; then \
	  echo "check-docs: tests/data/docs/stale.md passed, but its figure is stale"; exit 1; fi
	@if TESSERA_BIN=$(abspath $(BIN)) python3 scripts/check-docs.py tests/data/docs/repeated.md >/dev/null; then \
	  echo "check-docs: tests/data/docs/repeated.md passed, but it shows a line twice that comes out once"; exit 1; fi
	@d=$$(mktemp -d) && cp tests/data/docs/updatable.md $$d/ && \
	  TESSERA_BIN=$(abspath $(BIN)) python3 scripts/check-docs.py --update $$d/updatable.md >/dev/null; \
	  TESSERA_BIN=$(abspath $(BIN)) python3 scripts/check-docs.py $$d/updatable.md >/dev/null; rc=$$?; \
	  grep -q '1.00 s/step' $$d/updatable.md && rc=1; rm -rf $$d; \
	  if [ $$rc -ne 0 ]; then echo "check-docs: --update did not bring tests/data/docs/updatable.md up to date"; exit 1; fi

# With clang when installed (scripts/deps.sh installs it; it builds `make fuzz` too), else $(CC).
CHECK_CC ?= $(if $(shell command -v clang 2>/dev/null),clang,$(CC))
check:
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp $(MAKE) BUILD=build-check CC=$(CHECK_CC) ASAN=1 UBSAN=1 DEBUG=1 test

# Fuzzing with libFuzzer (clang): tests/fuzz/NAME.c, seeds in tests/fuzz/corpus/NAME/ (fuzz_hf and
# fuzz_model also every config of tests/data/hf, so each Hugging Face reader is reached). Each
# harness runs FUZZ_SECONDS under ASan + UBSan; what it learns goes to build-fuzz/corpus/NAME/,
# crashes to build-fuzz/crash-NAME-*. The first crash stops the run (exit status non-zero).
FUZZ_SECONDS ?= 60
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(wildcard tests/fuzz/*.c))
fuzz:
	$(MAKE) BUILD=build-fuzz CC=clang ASAN=1 UBSAN=1 FUZZ=1 fuzz-bins
	@for n in $(FUZZ_NAMES); do \
	  echo "== $$n: $(FUZZ_SECONDS) s, log build-fuzz/$$n.log"; mkdir -p build-fuzz/corpus/$$n; \
	  seeds=tests/fuzz/corpus/$$n; case $$n in fuzz_hf|fuzz_model) seeds="$$seeds tests/data/hf";; esac; \
	  if build-fuzz/fuzz/$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	       -print_final_stats=1 -artifact_prefix=build-fuzz/crash-$$n- \
	       build-fuzz/corpus/$$n $$seeds >build-fuzz/$$n.log 2>&1; then \
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
	$(MAKE) TS_PROBE_SHOW=1 all
	./$(BIN) plan --model llama2-70b --system h100-sxm-dgx --gpus 64 --global-batch 1024 --seq 4096

install: $(BIN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/tessera/models
	$(MAKE) BUILD=$(BUILD)-install DATA_DIR=$(PREFIX)/share/tessera all
	install -m 755 $(BUILD)-install/tessera $(DESTDIR)$(PREFIX)/bin/tessera
	cp -r models/llm models/systems models/stacks $(DESTDIR)$(PREFIX)/share/tessera/models/
	install -d $(DESTDIR)$(PREFIX)/share/tessera/validation  # the published runs behind the bands
	cp -r validation/published $(DESTDIR)$(PREFIX)/share/tessera/validation/

clean:
	rm -rf build build-check build-install build-fuzz

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(CU_OBJS:.o=.d)
