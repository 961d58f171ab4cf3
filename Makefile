# handroll — the WebApp operator on raw client-go.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

MODULE  := github.com/handroll/handroll
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
LDFLAGS := -X main.version=$(VERSION)
GO      ?= go
export GOWORK := off

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} \
	  /^[a-zA-Z0-9_-]+:.*?##/ { printf "  %-16s %s\n", $$1, $$2 } \
	  /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Regenerate deepcopy, defaulters, clientset, listers, informers, apply configurations and the CRD.
	hack/update-codegen.sh

.PHONY: verify
verify: verify-fmt verify-vet verify-codegen verify-deps ## Run every check CI runs before the tests.

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-formatted.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.local/*'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## Run go vet on the main module.
	$(GO) vet ./...

.PHONY: verify-codegen
verify-codegen: ## Fail if generated code or the CRD is out of date (or was edited by hand).
	hack/verify-codegen.sh

.PHONY: verify-deps
verify-deps: ## Fail if the main module (tests included) depends on controller-runtime.
	@if $(GO) list -deps -test ./... | grep -q '^sigs.k8s.io/controller-runtime'; then \
	  echo "the main module imports sigs.k8s.io/controller-runtime; only the twin module under hack/ may."; exit 1; \
	fi
	@echo "verify-deps: the main module does not depend on controller-runtime."

##@ Build

.PHONY: build
build: ## Build bin/handroll.
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/handroll ./cmd/handroll

##@ Test

.PHONY: test
test: ## Run the tests.
	$(GO) test ./...

##@ Run

.PHONY: run
run: build ## Run the operator against the cluster in KUBECONFIG.
	bin/handroll $(if $(KUBECONFIG),--kubeconfig=$(KUBECONFIG),) $(ARGS)
