# engram: the two commands are `make run` and `make test`. Each installs what is missing first.
# Downloads (tools, later model weights) go to $(CACHE_DIR), outside git.

CACHE_DIR ?= $(CURDIR)/.cache
CARGO ?= cargo
LISTEN ?= 127.0.0.1:8080
DATA_DIR ?= ./data
export CARGO_TERM_COLOR ?= never

.PHONY: setup setup-toolchain setup-test build run test lint fmt check-fmt clippy unit e2e clean-data

## setup: install whatever the build and the service need and is missing.
setup:
	@scripts/setup.sh "$(CACHE_DIR)"

## setup-toolchain: only what the build needs (Rust's components, C and C++ compilers).
setup-toolchain:
	@scripts/setup.sh "$(CACHE_DIR)" --toolchain

## setup-test: also what only the tests need (LibreOffice makes fixtures, qpdf encrypts one).
setup-test:
	@scripts/setup.sh "$(CACHE_DIR)" --test

## build: the release binary target/release/engram.
build: setup
	$(CARGO) build --release --locked -p engram

## run: build and serve on the embedded default (SQLite under $(DATA_DIR)).
run: build
	./target/release/engram serve --listen $(LISTEN) --data-dir $(DATA_DIR)

## test: style checks, then every test (unit, conformance, end-to-end against the real binary),
## and the end-to-end suite again with every server on a throwaway PostgreSQL (`--workspace`
## keeps the build's features, so the e2e binary is reused rather than rebuilt), all but the
## tests that exercise no storage of their own: parsing (what a format gives; its chunks' round
## trip is the conformance suite's, on both backends), logs, the hosted providers'
## own suites (what a provider reads; syncing, leases, OAuth and push are the
## connectors suites', kept), the pages driven in a browser (what they show comes through the
## routes the other suites test), the official clients (the wire shapes) and the local model's
## answers.
## Clippy's lints run inside the test build: clippy-driver wraps rustc for the workspace's own
## crates (as `cargo clippy` does), so the code is compiled once instead of checked, then built;
## `-D warnings` makes any lint or compiler warning fail it (dependencies' lints are capped).
## The same settings in every run keep the later ones from rebuilding anything.
CLIPPY_DRIVER ?= $(shell rustup which clippy-driver 2>/dev/null || command -v clippy-driver)
PG_SKIP = --skip parsing:: --skip logs:: --skip connectors_notion:: \
  --skip connectors_linear:: --skip connectors_slack:: --skip connectors_atlassian:: \
  --skip connectors_google:: \
  --skip console::the_console_works_in_a_real_browser --skip console_connectors:: \
  --skip console_webhooks:: --skip clients:: --skip answers::a_real_local_model
## The end-to-end suite runs on SQLite first, then on PostgreSQL beside every other test target
## (the crates' unit, conformance and integration tests, the benches run once, the examples),
## whose CPU fills what the end-to-end tests leave idle while they wait on their servers; each
## run selects targets rather than packages, so the build's features and artifacts are reused.
OTHER_TESTS = --lib --bins --examples --benches \
  $(foreach t,$(sort $(basename $(notdir $(wildcard crates/*/tests/*.rs)))),--test $(t))
## An integration test kept as a directory (tests/NAME/main.rs) is named here by hand.
OTHER_DIR_TESTS = $(filter-out crates/engram/tests/e2e/main.rs,$(wildcard crates/*/tests/*/main.rs))
## Four tests at a time on two cores: the end-to-end tests wait on their servers (indexing,
## polls, webhooks) for a third of their time, so two threads left the cores 36% idle (the SQLite
## pass: 219 s at two, 174 s at four, measured with `/usr/bin/time` on the e2e binary).
## The C and C++ of the test build at -O1, as the profile builds the Rust dependencies: numkong's
## kernels (usearch's distances) and usearch ask for -O3 themselves, which took 226 s of one core
## against 102 s at -O1 (`cargo build -p numkong -j1`, each alone); release builds keep -O3.
TEST_ENV = RUSTC_WORKSPACE_WRAPPER="$(CLIPPY_DRIVER)" RUSTFLAGS="-D warnings" CARGO_INCREMENTAL=0 \
  RUST_TEST_THREADS=4 CFLAGS="-O1" CXXFLAGS="-O1 -g0"
## The tests' set-up (downloads, packages, fixtures: the network and the disk more than the
## CPU, 2 m 40 s on a clean clone) runs beside the test build, which needs only the toolchain;
## the tests start once both are done, with the set-up's output printed after the build's.
test: setup-toolchain check-fmt
	@[ -n "$(CLIPPY_DRIVER)" ] || { echo "make test: clippy-driver is missing (rustup component add clippy)" >&2; exit 1; }
	@mkdir -p "$(CACHE_DIR)"; log="$(CACHE_DIR)/setup-test.log"; \
	  scripts/setup.sh "$(CACHE_DIR)" --test >"$$log" 2>&1 & setup=$$!; \
	  $(TEST_ENV) $(CARGO) test --workspace --locked --all-targets --no-run; built=$$?; \
	  wait $$setup; set_up=$$?; cat "$$log"; \
	  [ $$set_up -eq 0 ] || echo "make test: the set-up failed (above)" >&2; \
	  [ $$built -eq 0 ] && [ $$set_up -eq 0 ]
	$(TEST_ENV) $(CARGO) test --workspace --locked --test e2e
	@[ -z "$(OTHER_DIR_TESTS)" ] || { echo "make test: $(OTHER_DIR_TESTS) is run by no rule here: add it to OTHER_TESTS" >&2; exit 1; }
	@log="$(CACHE_DIR)/unit-tests.log"; \
	  $(TEST_ENV) $(CARGO) test --workspace --locked --no-fail-fast $(OTHER_TESTS) >"$$log" 2>&1 & others=$$!; \
	  $(TEST_ENV) scripts/with-postgres.sh $(CARGO) test --workspace --locked --test e2e -- $(PG_SKIP); \
	  pg=$$?; wait $$others; unit=$$?; cat "$$log"; \
	  [ $$unit -eq 0 ] || echo "make test: a unit, conformance or crate test failed (above)" >&2; \
	  [ $$pg -eq 0 ] && [ $$unit -eq 0 ]

lint: check-fmt clippy

check-fmt:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

fmt:
	$(CARGO) fmt --all

clean-data:
	rm -rf $(DATA_DIR)
