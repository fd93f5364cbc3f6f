# stackd's build. `make help` lists the targets.

SHELL    := bash
GO       ?= go
BIN      := $(CURDIR)/bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 30s
DATA_DIR ?= $(CURDIR)/.data
IMAGE    ?= localhost/stackd
IMAGE_DIR := $(BIN)/image

# Tests find the pinned toolchain in bin/ and must not read the machine's
# git configuration.
export PATH              := $(BIN):$(PATH)
export GIT_CONFIG_GLOBAL := /dev/null
export GIT_CONFIG_NOSYSTEM := true

.DEFAULT_GOAL := help
.PHONY: help build toolchain test test-short fuzz vet lint fmt run clean image image-base

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/stackd
	@echo "build: bin/stackd (the first build downloads stackd's modules and takes a minute or two)"
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/stackd ./cmd/stackd

toolchain: ## build the pinned pulumi CLI and YAML language host into bin/ (only when missing)
	@tools/toolchain.sh $(BIN)

test: toolchain vet ## run every test with the race detector, then fuzz the config parser
	set -o pipefail; $(GO) test -race -count=1 -parallel 3 -timeout 60m -json ./... | $(GO) run ./tools/testreport -slowest 20
	$(MAKE) fuzz

test-short: ## run the fast tests only (no Pulumi toolchain needed)
	$(GO) test -short -race ./...

# Minimising each new input takes up to a minute by default and stalls a
# short run; 1s keeps the fuzzer fuzzing.
fuzz: ## fuzz the config parser for FUZZTIME (30s)
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 1s ./daemon/spec/

vet: ## go vet, and fail on unformatted files
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^testdata/')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

lint: vet ## alias of vet

fmt: ## format the code
	gofmt -w $$(git ls-files '*.go' | grep -v '^testdata/')

# stackd installs the example's provider (bin/pulumi-resource-stackdtest,
# on PATH) into the data dir's plugin cache when it starts. Its resources
# are files in example-out, which the sandbox lets programs write
# (--sandbox-rw): a directory of its own in the data dir, which stackd
# allows, unlike the data dir itself or its own entries (docs/security.md).
run: build toolchain ## run the daemon on the example config, state in .data/
	@tools/example.sh $(CURDIR)/.data/example-repo
	@mkdir -p $(DATA_DIR)/example-out
	@echo "run: starting stackd on configs/stackd.example.yaml, state in $(DATA_DIR) (Ctrl-C stops it)"
	STACKD_EXAMPLE_OUT=$(DATA_DIR)/example-out \
		$(BIN)/stackd run --config configs/stackd.example.yaml --data-dir $(DATA_DIR) \
		--sandbox-rw $(DATA_DIR)/example-out

image: ## build the container image IMAGE:VERSION and :latest (Containerfile) with podman, or CONTAINER_ENGINE
	tools/image.sh build $(IMAGE_DIR) $(VERSION) $(IMAGE)

image-base: ## the same on BASE_IMAGE, an image with pulumi and language runtimes (Containerfile.base)
	@[ -n "$(BASE_IMAGE)" ] || { echo "set BASE_IMAGE, e.g. make image-base BASE_IMAGE=docker.io/pulumi/pulumi-nodejs:3.250.0"; exit 2; }
	BASE_IMAGE=$(BASE_IMAGE) tools/image.sh build $(IMAGE_DIR) $(VERSION) $(IMAGE)

clean: ## remove build output (not the toolchain, not .data)
	rm -f $(BIN)/stackd
