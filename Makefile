# unstall - build, test, demo, bench. `make check` and `make demo` work on a
# fresh machine: they install the missing build dependencies first.
CUDA_HOME ?= /usr/local/cuda
CC        ?= gcc
NVCC      ?= $(CUDA_HOME)/bin/nvcc
BUILD     ?= build

# uthash is header-only: the system's, or a copy in .deps/include (carried to
# GPU machines that have no package manager).
DEPS_INC  := $(wildcard .deps/include)
# The shim's layers, lowest first (docs/architecture.md): a module includes
# only headers of its own layer or a lower one (tools/check-layers checks it).
# The entry layers (shim/entry*: the exported symbols) sit above them all.
SHIM_LAYERS := base model detect report fix chain
# the one version string: the library (its log and reports), the launcher and the docs read VERSION
UNSTALL_VERSION := $(shell cat VERSION 2>/dev/null || echo unknown)
CPPFLAGS  += -D_GNU_SOURCE -I$(CUDA_HOME)/include $(addprefix -Ishim/,$(SHIM_LAYERS)) $(addprefix -I,$(DEPS_INC))
CPPFLAGS  += -DUS_VERSION='"$(UNSTALL_VERSION)"'
CFLAGS    ?= -O2 -g
CFLAGS    += -std=c11 -Wall -Wextra -Werror -fPIC -pthread
# SANITIZE=address,undefined or SANITIZE=thread (with a BUILD dir of its own):
# every object, library and test program of the build gets the sanitizer
# (make sanitize, tests/sanitize.sh).
ifneq ($(SANITIZE),)
SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-omit-frame-pointer -fno-sanitize-recover=all
CFLAGS    += $(SAN_FLAGS)
endif
# PROBE=1 (with a BUILD dir of its own): the shim times each copy's steps on
# the calling thread and writes them at exit (shim/base/probe.h,
# tools/bench/probe_steps.py); in other builds the stamps are not compiled.
ifneq ($(PROBE),)
CPPFLAGS  += -DUS_PROBE
endif
# COVERAGE=1 (with a BUILD dir of its own; make coverage): every object and
# program of the build counts its lines and branches (gcc --coverage); the
# shared libraries' links take it with the sanitizer's flags, gcov's runtime
# kept out of their exports (the shim exports only the CUDA API)
ifneq ($(COVERAGE),)
CFLAGS    += --coverage
SAN_FLAGS += --coverage -Wl,--exclude-libs,libgcov.a
endif
SHIM_CFLAGS := $(CFLAGS) -fvisibility=hidden
# generated dependencies: each object's .d file (gcc -MMD -MP) names the
# headers it includes, so that an edit rebuilds only the objects that include
# it; an object whose .d file is missing is rebuilt once (DEP_FILES below).
# The rule names the object both as this make spells it and by its absolute
# path: a build folder made once with BUILD=/abs/path and once with a
# relative BUILD would otherwise keep rules for a name the other make never
# asks for, and an edited header (options.def: the config's layout) rebuilt
# nothing, leaving objects of two layouts in one library.
DEPFLAGS   = -MMD -MP -MT '$@' -MT '$(abspath $@)'
# the jobs make check builds with (its test-bins step)
JOBS      ?= $(shell nproc 2>/dev/null || echo 1)

CORE_SRC  := $(foreach layer,$(SHIM_LAYERS),$(wildcard shim/$(layer)/*.c))
ENTRY_SRC := $(wildcard shim/entry*/*.c)
CORE_OBJ  := $(CORE_SRC:%.c=$(BUILD)/%.o)
ENTRY_OBJ := $(ENTRY_SRC:%.c=$(BUILD)/%.o)
SHIM      := $(BUILD)/libunstall.so
CORE_LIB  := $(BUILD)/libunstall_core.a

FAKE_SRC  := $(wildcard tests/fakecuda/*.c)
FAKE_OBJ  := $(FAKE_SRC:%.c=$(BUILD)/%.o)
FAKE_DIR  := $(BUILD)/fakecuda
FAKE_LIB  := $(FAKE_DIR)/libcudart.so.13
FAKE_DRV  := $(FAKE_DIR)/libcuda.so.1
FAKE_GEN  := $(BUILD)/fakecuda-gen

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/unit/%)
UNIT_OBJ  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.o)
UNIT_FAKE_OBJ := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%.o,$(wildcard tests/unit/fake_*.c))
FAKE_TEST_SRC := $(wildcard tests/fakecuda/tests/test_*.c)
FAKE_TEST_BIN := $(FAKE_TEST_SRC:tests/fakecuda/tests/%.c=$(BUILD)/fakecuda/%)

SCN_COMMON := $(filter-out tests/scenarios/case_% tests/scenarios/kernels%,$(wildcard tests/scenarios/*.c))
SCN_SRC   := $(wildcard tests/scenarios/case_*.c)
SCN_BIN   := $(SCN_SRC:tests/scenarios/%.c=$(BUILD)/scenarios/%)
SCN_GPU_BIN := $(SCN_SRC:tests/scenarios/%.c=$(BUILD)/gpu/%)
# the same programs as plain nvcc builds them: the CUDA runtime linked statically
SCN_GPU_STATIC_BIN := $(SCN_SRC:tests/scenarios/%.c=$(BUILD)/gpu-static/%)
SCN_DEPS  := $(SCN_COMMON) $(wildcard tests/scenarios/*.h)

# conformance programs (tests/conformance): one per rule fakecuda models, built
# over fakecuda for CI and over the real runtime for make conformance-gpu
CONF_SRC  := $(filter-out tests/conformance/conform.c tests/conformance/kernels_fake.c,$(wildcard tests/conformance/*.c))
CONF_BIN  := $(CONF_SRC:tests/conformance/%.c=$(BUILD)/conformance/fake/%)
CONF_GPU_BIN := $(CONF_SRC:tests/conformance/%.c=$(BUILD)/conformance/gpu/%)
CONF_DEPS := tests/conformance/conform.c tests/conformance/conform.h
CAPTURE_BIN     := $(BUILD)/capture/capture_conform
CAPTURE_GPU_BIN := $(BUILD)/gpu/capture_conform

BENCH_SRC := $(wildcard tools/bench/*.c)

# tools/p2pcheck's probe: over the real runtime (make p2pcheck) and over
# fakecuda (its tests in make check)
P2P_PROBE      := $(BUILD)/p2pcheck/probe
P2P_FAKE_PROBE := $(BUILD)/p2pcheck/fake/probe

STRESS_SRC := tests/stress/stress.c
STRESS_DEPS := $(STRESS_SRC) tests/stress/stress_kernels.h

.PHONY: all shim fakecuda scenarios check unit demo gpu-test bench compat compat-progs deps clean docs test-bins sanitize-bins sanitize
all: shim fakecuda scenarios

shim: $(SHIM)
fakecuda: $(FAKE_LIB) $(FAKE_DIR)/libcudart_static.a
scenarios: $(SCN_BIN)

# --- build dependencies -------------------------------------------------------
deps:
	@sh tools/install-deps.sh

# --- the shim -----------------------------------------------------------------
$(BUILD)/shim/%.o: shim/%.c $(BUILD)/shim/%.d | deps-checked
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(SHIM_CFLAGS) $(DEPFLAGS) -c $< -o $@

# -z now: the loader binds every function the shim imports when it loads
# the shim, not at each one's first call. Bound lazily, a process's first
# copy paid a symbol look-up (through every library the program loaded) for
# each libc function its path met for the first time (tools/bench/firstcall.sh
# measures a process's first copies).
$(SHIM): $(CORE_OBJ) $(ENTRY_OBJ)
	$(CC) -shared $(SAN_FLAGS) -o $@ $^ -ldl -pthread -Wl,--no-undefined -Wl,-z,defs -Wl,-z,now -Wl,-z,relro
	@! readelf -d $@ | grep -q 'NEEDED.*libcudart' || (echo "error: $@ must not link libcudart" && rm -f $@ && false)

$(CORE_LIB): $(CORE_OBJ)
	rm -f $@ && ar rcs $@ $^ # afresh: ar keeps members whose source is gone

.PHONY: deps-checked
deps-checked:
	@test -f /usr/include/uthash.h || test -f .deps/include/uthash.h || sh tools/install-deps.sh

# --- the simulated runtime (tests/fakecuda) -------------------------------------
# -Bsymbolic-functions: its own internal calls bind inside it, as the real
# runtime's do, so a preload never sees a call the program did not make.
$(BUILD)/tests/fakecuda/%.o: tests/fakecuda/%.c $(BUILD)/tests/fakecuda/%.d
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -Itests/fakecuda -c $< -o $@

# The simulation is the driver, libcuda.so.1; libcudart.so.13 reaches it as
# the real runtime does (dlopen, cuGetProcAddress) for its copies, and
# through trampolines for the rest (tests/fakecuda/runtime, docs/fakecuda.md).
$(FAKE_GEN)/names.h: $(FAKE_OBJ) tests/fakecuda/runtime/gen.sh tests/fakecuda/runtime/runtime.c
	sh tests/fakecuda/runtime/gen.sh $(FAKE_GEN) $(FAKE_OBJ)

$(FAKE_GEN)/entries.c: $(FAKE_GEN)/names.h

$(FAKE_GEN)/entries.o: $(FAKE_GEN)/entries.c
	$(CC) $(CFLAGS) -c $< -o $@

$(FAKE_GEN)/runtime.o: tests/fakecuda/runtime/runtime.c $(FAKE_GEN)/names.h tests/fakecuda/ptsz.h
	$(CC) $(CPPFLAGS) $(CFLAGS) -I$(FAKE_GEN) -c $< -o $@

$(FAKE_GEN)/trampolines.o: tests/fakecuda/runtime/trampolines.S $(FAKE_GEN)/names.h
	$(CC) -I$(FAKE_GEN) -c $< -o $@

$(FAKE_DRV): $(FAKE_OBJ) $(FAKE_GEN)/entries.o tests/fakecuda/libcuda.map
	@mkdir -p $(FAKE_DIR)
	$(CC) -shared $(SAN_FLAGS) -o $@ $(FAKE_OBJ) $(FAKE_GEN)/entries.o -Wl,-soname,libcuda.so.1 -Wl,--version-script=tests/fakecuda/libcuda.map -Wl,-Bsymbolic-functions -pthread -lm

$(FAKE_LIB): $(FAKE_GEN)/runtime.o $(FAKE_GEN)/trampolines.o tests/fakecuda/libcudart.map $(FAKE_DRV)
	@mkdir -p $(FAKE_DIR)
	$(CC) -shared $(SAN_FLAGS) -o $@ $(FAKE_GEN)/runtime.o $(FAKE_GEN)/trampolines.o -Wl,-soname,libcudart.so.13 -Wl,--version-script=tests/fakecuda/libcudart.map -Wl,-rpath,'$$ORIGIN' -ldl -pthread
	ln -sf libcudart.so.13 $(FAKE_DIR)/libcudart.so

# The same runtime as an archive: a program linked with it carries the
# runtime inside and reaches libcuda.so.1 only through dlopen and
# cuGetProcAddress, as a program built with nvcc's default static runtime
# (tests/driver).
$(FAKE_DIR)/libcudart_static.a: $(FAKE_GEN)/runtime.o $(FAKE_GEN)/trampolines.o
	@mkdir -p $(FAKE_DIR)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fakecuda/test_%: tests/fakecuda/tests/test_%.c $(FAKE_LIB) tests/common/summary.h
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/fakecuda -Itests/common $< -o $@ -L$(FAKE_DIR) -lcudart -l:libcuda.so.1 -ldl -lcmocka -pthread -lm -Wl,-rpath,'$$ORIGIN'

# --- unit tests (cmocka, tests/unit/test_<module>.c) ----------------------------
# each test and the fake runtime compiled once (their headers in .d files),
# then linked with the core
$(BUILD)/tests/unit/%.o: tests/unit/%.c $(BUILD)/tests/unit/%.d | deps-checked
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(DEPFLAGS) -Itests/unit -Itests/common -c $< -o $@

$(BUILD)/unit/test_%: $(BUILD)/tests/unit/test_%.o $(UNIT_FAKE_OBJ) $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(UNIT_FAKE_OBJ) -o $@ $(CORE_LIB) -lcmocka -ldl -pthread -lm

.SECONDARY: $(UNIT_OBJ) $(UNIT_FAKE_OBJ)

# the generated dependencies; a missing one is "remade" by the empty rule,
# which rebuilds its object (a build folder from before they were generated)
DEP_FILES := $(CORE_OBJ:.o=.d) $(ENTRY_OBJ:.o=.d) $(FAKE_OBJ:.o=.d) $(UNIT_OBJ:.o=.d) $(UNIT_FAKE_OBJ:.o=.d)
$(DEP_FILES):
include $(wildcard $(DEP_FILES))

# --- scenario programs: CI build over the simulated runtime ---------------------
# RUNPATH to the simulated runtime: run directly or under tools/unstall, they
# would otherwise find the toolkit's libcudart ("driver version is insufficient")
$(BUILD)/scenarios/case_%: tests/scenarios/case_%.c $(SCN_DEPS) tests/scenarios/kernels_fake.c $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/scenarios $< $(SCN_COMMON) tests/scenarios/kernels_fake.c -o $@ -L$(FAKE_DIR) -lcudart -pthread -lm -Wl,-rpath,'$$ORIGIN/../fakecuda'

# --- scenario programs: GPU build over the real runtime --------------------------
$(BUILD)/gpu/kernels.o: tests/scenarios/kernels.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -arch=sm_90 -Xcompiler -fPIC -c $< -o $@

$(BUILD)/gpu/case_%: tests/scenarios/case_%.c $(SCN_DEPS) $(BUILD)/gpu/kernels.o
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/scenarios $< $(SCN_COMMON) $(BUILD)/gpu/kernels.o -o $@ -L$(CUDA_HOME)/lib64 -lcudart -lstdc++ -pthread -lm -Wl,-rpath,$(CUDA_HOME)/lib64

# nvcc's default, -cudart static: the shim sees these through the driver layer
$(BUILD)/gpu-static/case_%: tests/scenarios/case_%.c $(SCN_DEPS) $(BUILD)/gpu/kernels.o
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/scenarios $< $(SCN_COMMON) $(BUILD)/gpu/kernels.o -o $@ -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lrt -lstdc++ -pthread -lm

# --- conformance programs: fakecuda (CI) and real GPU builds of the same source ---
$(BUILD)/conformance/fake/%: tests/conformance/%.c $(CONF_DEPS) tests/conformance/kernels_fake.c $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< tests/conformance/conform.c tests/conformance/kernels_fake.c -o $@ -L$(FAKE_DIR) -lcudart -pthread -Wl,-rpath,'$$ORIGIN/../../fakecuda'

$(BUILD)/conformance/gpu/kernels.o: tests/conformance/kernels.cu tests/conformance/conform.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -arch=sm_90 -Xcompiler -fPIC -c $< -o $@

$(BUILD)/conformance/gpu/%: tests/conformance/%.c $(CONF_DEPS) $(BUILD)/conformance/gpu/kernels.o
	$(CC) $(CPPFLAGS) $(CFLAGS) $< tests/conformance/conform.c $(BUILD)/conformance/gpu/kernels.o -o $@ -L$(CUDA_HOME)/lib64 -lcudart -lstdc++ -pthread -Wl,-rpath,$(CUDA_HOME)/lib64

.PHONY: conformance conformance-gpu
conformance: $(CONF_BIN) $(CAPTURE_BIN)
	@sh tests/conformance/run.sh $(BUILD)/conformance/fake

# needs only gcc, nvcc and a GPU (no cmocka, no uthash)
conformance-gpu: $(CONF_GPU_BIN)
	@sh tests/conformance/run.sh $(BUILD)/conformance/gpu

# --- capture conformance program (tests/capture): the same source over both runtimes ---
$(CAPTURE_BIN): tests/capture/capture_conform.c $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ -L$(FAKE_DIR) -lcudart -pthread

$(CAPTURE_GPU_BIN): tests/capture/capture_conform.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ -L$(CUDA_HOME)/lib64 -lcudart -pthread -Wl,-rpath,$(CUDA_HOME)/lib64

# --- tools/p2pcheck's probe: the same source over both runtimes --------------------
$(P2P_FAKE_PROBE): tools/p2pcheck-probe.c $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ -L$(FAKE_DIR) -lcudart -Wl,-rpath,'$$ORIGIN/../../fakecuda'

$(P2P_PROBE): tools/p2pcheck-probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $< -o $@ -L$(CUDA_HOME)/lib64 -lcudart -Wl,-rpath,$(CUDA_HOME)/lib64

.PHONY: p2pcheck
p2pcheck: $(P2P_PROBE) shim
# --- the random-copy stress (tests/stress): simulated runtime and real GPU --------
$(BUILD)/stress/stress: $(STRESS_DEPS) tests/stress/stress_kernels_fake.c $(FAKE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) $(STRESS_SRC) tests/stress/stress_kernels_fake.c -o $@ -L$(FAKE_DIR) -lcudart -pthread -lm -Wl,-rpath,'$$ORIGIN/../fakecuda'

$(BUILD)/gpu/stress_kernels.o: tests/stress/stress_kernels.cu tests/stress/stress_kernels.h
	@mkdir -p $(dir $@)
	$(NVCC) -O2 -arch=sm_90 -Xcompiler -fPIC -c $< -o $@

$(BUILD)/gpu/stress: $(STRESS_DEPS) $(BUILD)/gpu/stress_kernels.o
	$(CC) $(CPPFLAGS) $(CFLAGS) $(STRESS_SRC) $(BUILD)/gpu/stress_kernels.o -o $@ -L$(CUDA_HOME)/lib64 -lcudart -lstdc++ -pthread -lm -Wl,-rpath,$(CUDA_HOME)/lib64

# --- tests ------------------------------------------------------------------------
test-bins: all $(CORE_LIB) $(UNIT_BIN) $(FAKE_TEST_BIN) $(BUILD)/stress/stress $(CONF_BIN) $(CAPTURE_BIN) $(P2P_FAKE_PROBE)

# what the sanitizer passes run (tests/sanitize.sh leaves the capture and
# p2pcheck programs to the plain run; the conformance programs run in its
# full scope)
sanitize-bins: all $(CORE_LIB) $(UNIT_BIN) $(FAKE_TEST_BIN) $(BUILD)/stress/stress $(CONF_BIN)

check: deps
	@$(MAKE) --no-print-directory -j$(JOBS) test-bins
	@sh tests/run-all.sh $(BUILD)

# branch coverage per module of the shim (tools/coverage-summary, gcov): the
# unit and simulated-runtime suites over a build of its own, made without
# optimisation so that the branches are the source's (docs/testing.md). Like
# a sanitized build it runs several times slower, so the suites judge no
# timing (TEST_SANITIZER) and the programs they compile take --coverage
# (SAN_CFLAGS) to link with the instrumented simulated runtime. Left out: the
# conformance suites, which judge rules by timings, and pipelines, whose
# h2d_behind_kernel asks, whatever TEST_SANITIZER says, whether a 300 ms
# kernel still runs after a 16 MiB rewritten H2D (at -O0 the copy took longer)
COVERAGE_BUILD  ?= build-coverage
COVERAGE_SUITES ?= test_* shim detect scenarios driver hang stress faults
.PHONY: coverage
coverage: deps
	@CFLAGS="-O0 -g" $(MAKE) --no-print-directory -j$(JOBS) BUILD=$(COVERAGE_BUILD) COVERAGE=1 test-bins
	@find $(COVERAGE_BUILD) -name '*.gcda' -delete
	@TEST_SANITIZER=coverage SAN_CFLAGS=--coverage ONLY_SUITES="$(COVERAGE_SUITES)" CHECK_SANITIZE=0 \
	    sh tests/run-all.sh $(COVERAGE_BUILD); \
	    rc=$$?; python3 tools/coverage-summary $(COVERAGE_BUILD) --json $(COVERAGE_BUILD)/coverage.json && exit $$rc

# the suites again under ASan+UBSan and under TSan, each in a build dir of its
# own (build-asan, build-tsan); SANITIZERS="asan" runs one
sanitize: deps
	@sh tests/sanitize.sh $(SANITIZERS)

unit: $(UNIT_BIN)
	@for t in $(UNIT_BIN); do $$t || exit 1; done

docs:
	@python3 tools/gen-docs

demo: deps
	@sh tools/demo.sh $(BUILD)

gpu-test: shim $(SCN_GPU_BIN) $(CONF_GPU_BIN) $(CAPTURE_GPU_BIN) $(BUILD)/gpu/stress
	@sh tests/gpu/run.sh $(BUILD)

# PyTorch jobs natively and under the shim, results compared (tests/torch/run.py;
# needs torch and a GPU, else says SKIP). It uses $(BUILD)/libunstall.so as it
# is and builds nothing, so that a carried build folder serves (make shim first).
.PHONY: torch-test
torch-test:
	@$${PYTHON:-python3} tests/torch/run.py --build $(BUILD)

# NVIDIA cuda-samples natively and under the shim (GPU; CUDA_SAMPLES=checkout)
compat: shim
	@sh tools/compat/run.sh $(BUILD)

# the project's own compatibility programs (tests/compat; GPU, nvcc): also in gpu-test
compat-progs: shim
	@sh tests/compat/run.sh $(BUILD)

bench: shim $(SCN_GPU_BIN) $(SCN_GPU_STATIC_BIN)
	@sh tools/bench/run.sh $(BUILD)

# what the shim's building blocks cost on this CPU (no GPU): tools/bench/costs.c
$(BUILD)/bench/costs: tools/bench/costs.c $(CORE_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests/common $< -o $@ $(CORE_LIB) -ldl -pthread -lm

.PHONY: bench-costs
bench-costs: $(BUILD)/bench/costs
	@$(BUILD)/bench/costs

# make install PREFIX=/usr/local (DESTDIR= to stage): library, launcher, report
# and compare tools, p2pcheck (with its probe where the CUDA runtime library is
# there to build it), config profiles (tools/install.sh)
PREFIX ?= /usr/local
INSTALL_PROBE := $(if $(wildcard $(CUDA_HOME)/lib64/libcudart.so),$(P2P_PROBE))
.PHONY: install uninstall
install: shim $(INSTALL_PROBE)
	@sh tools/install.sh install $(BUILD) "$(PREFIX)" "$(DESTDIR)"

uninstall:
	@sh tools/install.sh uninstall $(BUILD) "$(PREFIX)" "$(DESTDIR)"

# make wheel: DIST/unstall-VERSION-py3-none-manylinux_2_N_x86_64.whl (the glibc
# the built library needs, read with objdump -T); make deb:
# DIST/unstall_VERSION_amd64.deb (dpkg-deb; p2pcheck's probe as for install).
# Offline, standard library only (tools/pkg/build, docs/install.md)
DIST ?= dist
.PHONY: wheel deb
wheel: shim
	@python3 tools/pkg/build wheel $(BUILD) $(DIST)

deb: shim $(INSTALL_PROBE)
	@python3 tools/pkg/build deb $(BUILD) $(DIST)

clean:
	rm -rf $(BUILD)
