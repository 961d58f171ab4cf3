# handroll — the WebApp operator on raw client-go.
# `make help` lists the targets.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

MODULE  := github.com/handroll/handroll
# The version has one source, the VERSION file; `handroll --version` prints
# it with the commit and whether the tree held uncommitted changes, so that a
# build that is not the release still says what it is.
VERSION        ?= $(shell cat VERSION)
GIT_COMMIT     ?= $(shell git rev-parse HEAD 2>/dev/null)
GIT_TREE_STATE ?= $(shell s="$$(git status --porcelain 2>/dev/null)" && { [[ -z "$$s" ]] && echo clean || echo dirty; })
LDFLAGS := -X main.version=$(VERSION) -X main.gitCommit=$(GIT_COMMIT) -X main.gitTreeState=$(GIT_TREE_STATE)
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
generate: ## Regenerate deepcopy, defaulters, conversions, clientset, listers, informers, apply configurations, the CRD, docs/lines.md and docs/side-by-side.md.
	hack/update-codegen.sh
	@$(MAKE) --no-print-directory chart-files
	@$(MAKE) --no-print-directory lines
	@$(MAKE) --no-print-directory side-by-side

.PHONY: lines
lines: ## Recount the hand-written lines per Manager piece, handroll and its twin, into docs/lines.md (test/docs checks it is current).
	$(GO) run ./hack/linecount -w

# After lines: the page shows docs/lines.md's counts.
.PHONY: side-by-side
side-by-side: ## Write docs/side-by-side.md: the start sequence and the reconciler beside the twin's, step by step, with docs/lines.md's counts (test/docs checks it is current).
	$(GO) run ./hack/sidebyside -w

.PHONY: verify
verify: verify-fmt verify-vet verify-codegen verify-deps lint ## Run every check CI runs before the tests.

# golangci-lint, at the version hack/tools/go.mod pins, built from source
# with the Go in use into .local/bin/ on first use (about 2 minutes on 2
# cores), and again only when the pin or Go changes. .golangci.yml says
# which linters run and why. The modules with code of their own are linted
# one after the other: the main module, the controller-runtime twin,
# hack/image and hack/release (hack/tools holds only blank imports of the
# tools).
GOLANGCI_LINT_PKG := github.com/golangci/golangci-lint/v2/cmd/golangci-lint
LINT_MODULES      := . hack/compare hack/image hack/release

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools, built on first use) on the main module, the controller-runtime twin, hack/image and hack/release.
	@v="$$(awk '$$1 == "github.com/golangci/golangci-lint/v2" { print $$2 }' hack/tools/go.mod)"; \
	if [[ -z "$$v" ]]; then echo "lint: hack/tools/go.mod pins no golangci-lint" >&2; exit 1; fi; \
	bin="$(CURDIR)/.local/bin/golangci-lint-$$v-$$($(GO) env GOVERSION)"; \
	if [[ ! -x "$$bin" ]]; then \
	  echo "lint: building golangci-lint $$v into .local/bin/"; \
	  mkdir -p .local/bin; \
	  GOFLAGS= $(GO) -C hack/tools build -o "$$bin.tmp" $(GOLANGCI_LINT_PKG); \
	  mv -f "$$bin.tmp" "$$bin"; \
	fi; \
	status=0; \
	for m in $(LINT_MODULES); do \
	  echo "golangci-lint run ($$m)"; \
	  (cd "$$m" && "$$bin" run --config "$(CURDIR)/.golangci.yml" ./...) || status=1; \
	done; \
	exit $$status

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-formatted.
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.local/*'))"; \
	if [[ -n "$$out" ]]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## Run go vet on the main module, the controller-runtime twin, hack/image and hack/release.
	$(GO) vet ./...
	$(GO) -C hack/compare vet ./...
	$(GO) -C hack/image vet ./...
	$(GO) -C hack/release vet ./...

.PHONY: verify-codegen
verify-codegen: ## Fail if generated code or the CRD is out of date (or was edited by hand).
	hack/verify-codegen.sh

.PHONY: verify-deps
verify-deps: ## Fail if the main module (tests included) depends on controller-runtime.
	@if $(GO) list -deps -test ./... | grep -q '^sigs.k8s.io/controller-runtime'; then \
	  echo "the main module imports sigs.k8s.io/controller-runtime; only the twin module under hack/ may."; exit 1; \
	fi
	@echo "verify-deps: the main module does not depend on controller-runtime."

##@ Helm

# helm, at the version hack/tools/go.mod pins, built from source with the Go
# in use into .local/bin/ on first use (minutes on 2 cores), and again
# only when the pin or Go changes, as golangci-lint is. HELM is its path;
# set HELM to use another helm binary.
HELM_PKG     := helm.sh/helm/v4/cmd/helm
HELM_VERSION  = $(shell awk '$$1 == "helm.sh/helm/v4" { print $$2 }' hack/tools/go.mod)
HELM         ?= $(CURDIR)/.local/bin/helm-$(HELM_VERSION)-$(shell $(GO) env GOVERSION)

.PHONY: helm
helm: $(HELM) ## Build helm (pinned in hack/tools) into .local/bin/ if needed and print its path.
	@echo "$(HELM)"

$(HELM):
	@if [[ -z "$(HELM_VERSION)" ]]; then echo "helm: hack/tools/go.mod pins no helm.sh/helm/v4" >&2; exit 1; fi
	@echo "helm: building helm $(HELM_VERSION) into $(@D)/" >&2
	@mkdir -p "$(@D)"
	@GOFLAGS= $(GO) -C hack/tools build -trimpath -ldflags "-X helm.sh/helm/v4/internal/version.version=$(HELM_VERSION)" -o "$@.tmp" $(HELM_PKG)
	@mv -f "$@.tmp" "$@"

# cosign (sigstore), which signs and verifies releases, pinned in a module of
# its own under hack/tools (its dependencies would move the other tools'),
# built as helm is. COSIGN_OFFLINE: a key's signature only, nothing sent to
# a transparency log or fetched from sigstore's TUF repository; both need
# the internet. COSIGN_REGISTRY: plain HTTP to a loopback registry.
COSIGN_PKG      := github.com/sigstore/cosign/v3/cmd/cosign
COSIGN_VERSION   = $(shell awk '$$1 == "require" && $$2 == "github.com/sigstore/cosign/v3" { print $$3 } $$1 == "github.com/sigstore/cosign/v3" { print $$2 }' hack/tools/cosign/go.mod)
COSIGN          ?= $(CURDIR)/.local/bin/cosign-$(COSIGN_VERSION)-$(shell $(GO) env GOVERSION)
COSIGN_OFFLINE  := --use-signing-config=false --tlog-upload=false
COSIGN_REGISTRY  = $(if $(filter true,$(REGISTRY_INSECURE)),--allow-http-registry=true --allow-insecure-registry=true)

.PHONY: cosign
cosign: $(COSIGN) ## Build cosign (pinned in hack/tools/cosign) into .local/bin/ if needed and print its path.
	@echo "$(COSIGN)"

$(COSIGN):
	@if [[ -z "$(COSIGN_VERSION)" ]]; then echo "cosign: hack/tools/cosign/go.mod pins no github.com/sigstore/cosign/v3" >&2; exit 1; fi
	@echo "cosign: building cosign $(COSIGN_VERSION) into $(@D)/ (minutes on 2 cores, once)" >&2
	@mkdir -p "$(@D)"
	@GOFLAGS= $(GO) -C hack/tools/cosign build -trimpath \
	  -ldflags "-X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION)" -o "$@.tmp" $(COSIGN_PKG)
	@mv -f "$@.tmp" "$@"

# The chart reads two files of manifests/ as data, from copies inside it
# (helm reads nothing outside a chart): the generated CRD and the alerts.
# test/chart checks that they are current.
CHART_FILES := manifests/crd/handroll.dev_webapps.yaml manifests/monitoring/prometheus_rule.yaml

.PHONY: chart-files
chart-files: ## Copy the CRD and the alerts of manifests/ into charts/handroll/files/ (make generate does it too).
	cp $(CHART_FILES) charts/handroll/files/

# The chart, packaged as helm repositories serve it: $(CHART_OUT)/handroll-X.Y.Z.tgz
# for VERSION vX.Y.Z (chart version X.Y.Z, appVersion vX.Y.Z). Every
# timestamp in the archive is SOURCE_DATE_EPOCH (helm honours it), so the
# same commit gives the same bytes. CHART_IMG, such as
# <registry>/handroll@sha256:..., becomes the packaged chart's default image
# (manager.image.repository, .tag and .digest in values.yaml), set by
# hack/manifest, which changes those values' bytes and nothing else.
CHART_OUT ?= dist
CHART_IMG ?=

.PHONY: chart-package
chart-package: $(HELM) ## Package charts/handroll into CHART_OUT (default dist/) as handroll-X.Y.Z.tgz, reproducibly; CHART_IMG sets its default image.
	@v="$(VERSION)"; if [[ ! "$$v" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]]; then \
	  echo "chart-package: VERSION=$$v is not vX.Y.Z" >&2; exit 1; fi; \
	tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	cp -R charts/handroll "$$tmp/handroll"; \
	if [[ -n "$(CHART_IMG)" ]]; then $(GO) run ./hack/manifest chart-image "$(CHART_IMG)" "$$tmp/handroll/values.yaml"; fi; \
	$(GO) run ./hack/chartmeta --chart "$$tmp/handroll" --changelog CHANGELOG.md --version "$$v" $(if $(CHART_IMG),--image "$(CHART_IMG)"); \
	mkdir -p "$(CHART_OUT)"; \
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) "$(HELM)" package "$$tmp/handroll" \
	  --version "$${v#v}" --app-version "$$v" --destination "$(CHART_OUT)"

##@ Build

# Static (no cgo), so that the binary runs on the image's empty base.
.PHONY: build
build: ## Build bin/handroll (static).
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/handroll ./cmd/handroll

# The operator's image reference: `make image` tags its archive with it,
# `make image-push` pushes it, and `make deploy` runs it. Name a registry
# host (localhost/ for the local node): containerd keeps names as given, and
# the kubelet asks for the full one.
IMG ?= localhost/handroll:dev

##@ Image

# Images built without a container engine (hack/image): static binaries on
# an empty base, one per platform, in a multi-platform OCI archive that
# `ctr images import` reads, in .local/image/. Each binary is
# cross-compiled by the Go in use (no cgo, so another platform needs no
# emulation) and runs as 65532:65532, not root. No base image is pulled, so
# there is no digest to pin. Every timestamp in an image is
# SOURCE_DATE_EPOCH, by default the commit time of HEAD, so that the same
# commit (clean tree, same Go) gives the same digest.
IMAGE_DIR          := .local/image
IMAGE_PLATFORMS    ?= linux/amd64 linux/arm64
SOURCE_DATE_EPOCH  ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
# The test images run on the local node only: this machine's architecture.
TEST_IMAGE_PLATFORMS ?= linux/$(shell $(GO) env GOARCH)
PAUSE_IMG          ?= localhost/handroll-pause:1
DEMO_IMG           ?= localhost/handroll-demo:1
CONTAINERD_ADDRESS ?= /run/handroll-node/containerd.sock
LOAD_ARCHIVE       ?= $(IMAGE_DIR)/handroll.tar

# $(call build-image,NAME,PACKAGE,PLATFORMS,TAG,LDFLAGS,FLAGS): build the
# static bin/NAME-OS-ARCH of PACKAGE for each platform, then
# $(IMAGE_DIR)/NAME.tar holding /NAME, tagged TAG, with hack/image's FLAGS;
# prints its digest last. hack/image runs in its own module's directory,
# hence the absolute paths.
define build-image
	@for p in $(3); do \
	  cmd=(env CGO_ENABLED=0 GOOS="$${p%%/*}" GOARCH="$${p#*/}" $(GO) build -trimpath -ldflags '$(5)' -o "bin/$(1)-$${p//\//-}" $(2)); \
	  echo "$${cmd[*]}"; "$${cmd[@]}"; \
	done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) -C hack/image run . --name $(1) --tag $(4) $(6) \
	  $(foreach p,$(3),--binary $(p)=$(CURDIR)/bin/$(1)-$(subst /,-,$(p))) --out $(CURDIR)/$(IMAGE_DIR)/$(1).tar
endef

# The operator image's OCI labels (org.opencontainers.image.*); created is
# SOURCE_DATE_EPOCH. The source is the module path.
IMAGE_LABELS = --title=handroll --version=$(VERSION) --revision=$(GIT_COMMIT) --source=$(MODULE) --licenses=Apache-2.0

.PHONY: image
image: ## Build the image IMG for linux/amd64 and linux/arm64 into .local/image/handroll.tar, no container engine needed; prints its digest.
	$(call build-image,handroll,./cmd/handroll,$(IMAGE_PLATFORMS),$(IMG),$(LDFLAGS),$(IMAGE_LABELS))

# make image-push IMG=<registry>/<repo>:<tag> builds the image first (the
# build cache makes that quick when nothing changed, and so what is pushed
# is the tree as it is, never an archive left from another commit), unless
# PUSH_ARCHIVE names an archive to push as it is, such as a release's
# dist/handroll-image.tar. Credentials: $DOCKER_CONFIG/config.json, else
# ~/.docker/config.json (docker login, or credential helpers they name).
# REGISTRY_INSECURE=true allows plain HTTP, to localhost or a loopback
# address only.
PUSH_ARCHIVE      ?=
REGISTRY_INSECURE ?= false

.PHONY: image-push
image-push: ## Push the image IMG=<registry>/<repo>:<tag> (built by make image first, or PUSH_ARCHIVE as it is) with no container engine; prints the pushed digest.
	@if [[ -z "$(PUSH_ARCHIVE)" ]]; then $(MAKE) --no-print-directory image; fi
	$(GO) -C hack/image run . push --archive $(abspath $(or $(PUSH_ARCHIVE),$(IMAGE_DIR)/handroll.tar)) --tag $(IMG) --insecure=$(REGISTRY_INSECURE)

.PHONY: image-pause
image-pause: ## Build the local node's sandbox image localhost/handroll-pause:1 into .local/image/pause.tar (this machine's architecture only).
	$(call build-image,pause,./test/images/pause,$(TEST_IMAGE_PLATFORMS),$(PAUSE_IMG),)

.PHONY: image-demo
image-demo: ## Build the demo WebApp image DEMO_IMG (localhost/handroll-demo:1) into .local/image/demo.tar (this machine's architecture only).
	$(call build-image,demo,./test/images/demo,$(TEST_IMAGE_PLATFORMS),$(DEMO_IMG),)

.PHONY: test-images
test-images: image-pause image-demo ## Build both test images, pause and demo.

.PHONY: image-load
image-load: ## Import .local/image/handroll.tar (or LOAD_ARCHIVE) into the local node's containerd (CONTAINERD_ADDRESS).
	@if [[ ! -S "$(CONTAINERD_ADDRESS)" ]]; then \
	  echo "image-load: no containerd listens at $(CONTAINERD_ADDRESS): start the local cluster and its real node first (make cluster-up)" >&2; exit 1; \
	fi
	@if [[ ! -f "$(LOAD_ARCHIVE)" ]]; then \
	  echo "image-load: $(LOAD_ARCHIVE) is missing: build it first (make image)" >&2; exit 1; \
	fi
	ctr --address $(CONTAINERD_ADDRESS) -n k8s.io images import --all-platforms $(LOAD_ARCHIVE)

##@ Test

# The control-plane binaries, built from pinned sources on first use
# (10-15 minutes on 2 idle cores, longer on a busy machine; seconds
# afterwards). It says which binary it builds, n of m, and every minute how
# long the current one has taken.
.PHONY: testbin
testbin: ## Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from pinned sources.
	hack/testbin.sh build

# The operator the tests run, built once before them (test/operator reads
# HANDROLL_TEST_BINARY), so that no test package builds its own and no
# test's budget pays for a build. Plain `go test` builds it in TestMain.
TEST_BINARY := $(CURDIR)/.local/test/handroll

.PHONY: test-binary
test-binary: ## Build the operator the tests run into .local/test/handroll (make test does it first).
	@mkdir -p "$(dir $(TEST_BINARY))"
	$(GO) build -o "$(TEST_BINARY)" ./cmd/handroll

# HANDROLL_TEST_TIMEOUT_SCALE multiplies every time budget of the tests
# (test/budget), and go test's -timeout here: a positive number, default 1;
# anything else fails each test binary at its start, naming the variable.
# No budget covers a build or the control plane's first start, which have
# their own; raise it for a machine slower or busier than a shared 2-core
# runner.
HANDROLL_TEST_TIMEOUT_SCALE ?= 1
export HANDROLL_TEST_TIMEOUT_SCALE
# $(call scaled-timeout,MINUTES): go test's -timeout, scaled.
scaled-timeout = $(shell awk -v s='$(HANDROLL_TEST_TIMEOUT_SCALE)' -v m='$(1)' 'BEGIN { if (s + 0 <= 0) s = 1; printf "%dm", m * s + 0.999 }')
TEST_TIMEOUT = $(call scaled-timeout,30)

# `go test` runs packages in parallel; each integration or end-to-end package
# starts its own control plane, so two at a time fit these machines. -race:
# the controller machinery, the elector and the start sequence share state
# across goroutines, and the race detector is the check that they do it right.
# -count=1: tests that run the operator binary use one built outside go
# test, which the test cache cannot see, so a cached pass could hide a change.
# -ldflags=-w: no DWARF in the test binaries; stack traces and the race
# detector's reports read the symbol table, not DWARF, and linking some fifty
# binaries that hold client-go takes a third less time without it.
TEST_FLAGS ?= -race -count=1 -p 2 -timeout $(TEST_TIMEOUT) -ldflags=-w

.PHONY: test
test: testbin $(HELM) test-binary ## Run unit, integration and end-to-end tests (with -race; builds the control plane, helm and the operator first if needed). HANDROLL_TEST_TIMEOUT_SCALE=N multiplies every test's time budget (default 1).
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh path | tail -n 1)" HELM="$(HELM)" HANDROLL_TEST_BINARY="$(TEST_BINARY)" $(GO) test $(TEST_FLAGS) ./...
	$(GO) -C hack/image test -count=1 ./...

# Not part of `make test`, which tests the operator: the release tools' own
# module compiles the operator for both release platforms and links syft,
# some ten minutes on a cold 2-core machine that a newcomer's first run
# need not pay. CI runs it, and the short fuzz, after make test.
.PHONY: test-release
test-release: ## Run the release tools' tests (hack/release: SBOM, provenance and sums of the operator built for both platforms).
	$(GO) -C hack/release test -count=1 ./...

.PHONY: fuzz-short
fuzz-short: ## Run each fuzz target briefly ($(FUZZTIME_SHORT) inputs), as CI does.
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

# Go fuzz targets, as package:target. `go test` runs their committed seed
# corpora (testdata/fuzz/) with the other tests; `make fuzz` explores.
FUZZ_TARGETS := \
  ./pkg/apis/handroll/v1alpha1:FuzzRoundTripFromV1 \
  ./pkg/apis/handroll/v1alpha1:FuzzRoundTripFromV1alpha1 \
  ./pkg/apis/handroll/v1alpha1:FuzzV1SpecAnnotation \
  ./pkg/admission:FuzzAdmissionReview \
  ./pkg/controller/webapp:FuzzDesiredState \
  ./pkg/controller/webapp:FuzzFirstDifference \
  ./pkg/stripjson:FuzzStrip
FUZZTIME       ?= 60s
FUZZTIME_SHORT ?= 2000x

# make test beside one busy loop per core, as on a machine that another
# CPU-heavy job shares: the suite must pass there too, with the default
# budgets. The loops are plain shell, stopped when the target ends however
# it ends (and by themselves, should make be killed outright).
.PHONY: test-busy
test-busy: ## Run make test with one busy loop per core (nproc) beside it, and print how long it took.
	@n="$$(nproc)"; shell=$$$$; loops=(); \
	trap 'kill "$${loops[@]}" 2>/dev/null || true' EXIT; trap 'exit 130' INT; trap 'exit 143' TERM HUP; \
	for _ in $$(seq "$$n"); do \
	  ( while kill -0 "$$shell" 2>/dev/null; do for ((i = 0; i < 100000; i++)); do :; done; done ) & loops+=($$!); \
	done; \
	echo "test-busy: make test beside $$n busy loop(s)"; \
	start=$$SECONDS; status=0; \
	$(MAKE) --no-print-directory test || status=$$?; \
	d=$$((SECONDS - start)); \
	echo "test-busy: make test $$( ((status)) && echo FAILED || echo passed) in $$((d / 60))m$$((d % 60))s beside $$n busy loop(s)"; \
	exit $$status

.PHONY: fuzz
fuzz: ## Fuzz each target for FUZZTIME (default 60s; a count such as 5000x works too).
	@for t in $(FUZZ_TARGETS); do \
	  pkg="$${t%%:*}"; name="$${t##*:}"; \
	  echo "fuzz $$name ($$pkg) for $(FUZZTIME)"; \
	  $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s "$$pkg"; \
	done

.PHONY: test-chaos
test-chaos: testbin test-binary ## Run the fault tests (test/chaos: crashes, API server and etcd outages, partitions, throttling, sharded replicas); minutes, not part of make test.
	HANDROLL_CHAOS=1 KUBEBUILDER_ASSETS="$$(hack/testbin.sh path | tail -n 1)" HANDROLL_TEST_BINARY="$(TEST_BINARY)" $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -v ./test/chaos/

# Not part of `make test`: it needs the repository's history (the releases
# upgraded from, the latest before this tree as `go run ./hack/releases
# latest` finds it and the oldest supported, named in
# test/upgrade/supported, are each built from a git worktree) and takes a
# few minutes. docs/upgrade.md says what it proves.
.PHONY: test-upgrade
test-upgrade: testbin ## Upgrade from the latest release and from the oldest supported one to this tree on the local control plane while a writer writes: no refused write, no pod rolled, no child written, statuses kept.
	HANDROLL_UPGRADE=1 KUBEBUILDER_ASSETS="$$(hack/testbin.sh path | tail -n 1)" $(GO) test -race -count=1 -v -timeout $(call scaled-timeout,15) ./test/upgrade/

# The real node needs root and the Debian packages that
# hack/install-node-packages.sh installs; where they cannot be had, the
# target says so and passes without running anything.
.PHONY: test-real
test-real: testbin $(HELM) $(COSIGN) ## Run handroll in real containers on the local cluster's real node (test/real: deploy elsewhere, local run beside, undeploy, rollout, kill, egress guard, helm install/upgrade/uninstall, upgrades from the latest and oldest releases by helm and install.yaml, a signed release installed from OCI); starts the cluster if needed.
	@if ! hack/install-node-packages.sh; then \
	  echo "test-real: SKIPPED: the container runtime cannot be installed on this machine (root and apt-get are needed)"; exit 0; \
	fi; \
	$(MAKE) --no-print-directory cluster-up REAL_NODE=true && \
	$(MAKE) --no-print-directory image-demo && \
	$(MAKE) --no-print-directory image-load LOAD_ARCHIVE=$(IMAGE_DIR)/demo.tar && \
	HANDROLL_REAL=1 HELM=$(HELM) COSIGN=$(COSIGN) $(GO) test -count=1 -v -timeout $(call scaled-timeout,40) ./test/real/

.PHONY: test-twin
test-twin: testbin ## Run handroll's behaviour scenarios against the controller-runtime twin (hack/compare).
	hack/compare/test-twin.sh

# Not part of `make test`: it takes long (the default plan, with the
# cluster's controllers, about two hours on 2 cores) and its numbers are a
# report, not a pass/fail.
# BENCH_FLAGS, e.g. "-n 300 -rounds 3" or "-plan" (print the plan and its
# estimate, run nothing); `go run ./hack/bench -h`.
BENCH_FLAGS ?=

.PHONY: bench
bench: testbin ## Measure handroll, its controller-runtime twins and the floor at several sizes in one run; writes docs/benchmarks.md, .json and the scale plot.
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh path | tail -n 1)" $(GO) run ./hack/bench $(BENCH_FLAGS)

.PHONY: test-unit
test-unit: ## Run only the tests that need no control plane.
	$(GO) test -short ./...

##@ Local cluster

CLUSTER := $(GO) run ./hack/cluster

# REAL_NODE: auto starts the real node real-0 where this machine can run
# containers (root; hack/install-node-packages.sh installs the runtime),
# true fails where it cannot, false starts fake nodes only.
REAL_NODE ?= auto

.PHONY: cluster-up
cluster-up: testbin ## Start the local cluster in the background (reuses a running one), with a real node where the machine can; kubeconfig in .local/kubeconfig.
	@if [[ "$(REAL_NODE)" != false ]]; then $(MAKE) --no-print-directory node-prerequisites || [[ "$(REAL_NODE)" == auto ]]; fi
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh path | tail -n 1)" $(CLUSTER) --real-node=$(REAL_NODE) up

.PHONY: node-prerequisites
node-prerequisites: ## Install the real node's Debian packages (as root), build kubelet, kube-proxy, the node's registry and the sandbox image.
	hack/install-node-packages.sh
	hack/testbin.sh node
	@$(MAKE) --no-print-directory registry image-pause

# The real node's registry (hack/image/cmd/registry), on loopback: make
# deploy pushes the operator's image there and the node pulls it.
.PHONY: registry
registry: ## Build the local cluster's registry into .local/bin/registry.
	$(GO) -C hack/image build -trimpath -o $(CURDIR)/.local/bin/registry ./cmd/registry

.PHONY: cluster-down
cluster-down: ## Stop every process of the local cluster and remove its state.
	$(CLUSTER) down

.PHONY: cluster-status
cluster-status: ## Say what of the local cluster runs.
	$(CLUSTER) status

.PHONY: cluster-leftovers
cluster-leftovers: ## Fail if a local cluster left a process, mount, cgroup, rule, route or bridge on this machine.
	$(CLUSTER) leftovers

##@ Deploy

# The WebApp CRD alone (manifests/crd), under kubebuilder's target names, so
# that `make install run KUBECONFIG=...` runs the operator from here against
# a fresh cluster. Without KUBECONFIG: the local cluster, started if needed
# (as run does). uninstall deletes the CRD and with it every WebApp in the
# cluster (the garbage collector then takes their Deployments, Services and
# ConfigMaps), as kubebuilder's does: no prompt, it names how many go;
# ignore-not-found=true makes a missing CRD no error.
KUBECTL            ?= $(or $(shell command -v kubectl),$(shell hack/testbin.sh path | tail -n 1)/kubectl)
INSTALL_KUBECONFIG  = $(or $(strip $(KUBECONFIG)),$(LOCAL_KUBECONFIG))
ignore-not-found   ?= false

# install applies as field manager handroll-install, without
# --force-conflicts: it needs none and must take none. A second make install
# owns what the first set; the operator's write to the CRD, its conversion's
# caBundle, is a field the manifest leaves out, so no conflict. What is left
# to conflict with is another install path (make deploy's handroll-deploy,
# helm) that set the conversion's namespace to the one its operator runs in:
# taking it would send every conversion where no operator runs, so kubectl
# stops and names the manager and fields. Such a CRD is updated by the path
# that installed it (make deploy, helm upgrade).
.PHONY: install
install: ## Install the WebApp CRD (manifests/crd) into KUBECONFIG's cluster, else the local cluster's; waits until it is Established.
	@if [[ -z "$(strip $(KUBECONFIG))" ]]; then $(MAKE) --no-print-directory cluster-up; fi
	$(KUBECTL) --kubeconfig "$(INSTALL_KUBECONFIG)" apply --server-side --field-manager=handroll-install -k manifests/crd
	$(KUBECTL) --kubeconfig "$(INSTALL_KUBECONFIG)" wait --for=condition=Established --timeout=60s crd/webapps.handroll.dev

.PHONY: uninstall
uninstall: ## Delete the WebApp CRD, and so every WebApp, from KUBECONFIG's cluster (else the local one's); ignore-not-found=true: no error if absent.
	@if [[ ! -f "$(INSTALL_KUBECONFIG)" ]]; then \
	  echo "uninstall: no kubeconfig at $(INSTALL_KUBECONFIG): set KUBECONFIG, or start the local cluster (make cluster-up)" >&2; exit 1; fi
	@n="$$($(KUBECTL) --kubeconfig "$(INSTALL_KUBECONFIG)" get webapps.handroll.dev --all-namespaces --no-headers 2>/dev/null | wc -l || true)"; \
	if [[ "$$n" -gt 0 ]]; then echo "uninstall: deleting the CRD deletes the cluster's $$n WebApp(s), and their workloads with them"; fi
	$(KUBECTL) --kubeconfig "$(INSTALL_KUBECONFIG)" delete --ignore-not-found=$(ignore-not-found) --timeout=120s -k manifests/crd

# Without KUBECONFIG: the local cluster (started if needed), the image built
# with `make image` and pushed to its registry (local-push), which its real
# node pulls from, manifests/local. With
# KUBECONFIG: that cluster and manifests/default; IMG must be pullable there
# (make image-push IMG=...). KUSTOMIZE_DIR overrides the base.
#
# deploy applies as field manager handroll-deploy with --force-conflicts
# (hack/deploy.sh): a deploy says what is to run, so it takes the fields it
# sets from whoever set them otherwise. They are the CRD's conversion, from
# make install's handroll-install (an overlay moves the operator and the
# conversion must follow it); the Deployment's replicas, from a kubectl
# scale, or from the scale to 0 of a `handroll uninstall` that stopped
# before the Deployment was deleted; its image, from a kubectl set image
# (IMG names the image). Fields the manifests leave out, such as the CA
# bundles the operator writes, stay theirs. It would take helm's fields
# too: deploy to a cluster with no helm release of handroll.
.PHONY: deploy
deploy: ## Install handroll with the image IMG: on the local cluster's real node, or on KUBECONFIG's cluster.
ifneq ($(strip $(KUBECONFIG)),)
	hack/deploy.sh deploy "$(or $(KUSTOMIZE_DIR),manifests/default)" "$(IMG)"
else
	@$(MAKE) --no-print-directory cluster-up REAL_NODE=true
	@$(MAKE) --no-print-directory local-push
	KUBECONFIG="$(LOCAL_KUBECONFIG)" hack/deploy.sh deploy "$(or $(KUSTOMIZE_DIR),manifests/local)" "$(IMG)"
endif

# The local cluster's real node pulls localhost/NAME:TAG from the registry
# it runs on loopback (its containerd's hosts configuration says so), as a
# cluster pulls from any registry: build the image, push it there.
.PHONY: local-push
local-push: ## Build the image IMG (localhost/NAME:TAG) and push it to the local cluster's registry, which its real node pulls from; PUSH_ARCHIVE: push that archive instead of building.
	@case "$(IMG)" in localhost/*) ;; *) \
	  echo "local-push: IMG=$(IMG): on the local cluster, name the image localhost/NAME:TAG (its node pulls localhost/... from the cluster's registry)" >&2; exit 1;; \
	esac
	@$(if $(PUSH_ARCHIVE),,$(MAKE) --no-print-directory image)
	@reg="$$($(CLUSTER) registry | tail -n 1)"; img='$(IMG)'; \
	$(MAKE) --no-print-directory image-push PUSH_ARCHIVE=$(or $(PUSH_ARCHIVE),$(IMAGE_DIR)/handroll.tar) IMG="$$reg/$${img#localhost/}" REGISTRY_INSECURE=true

.PHONY: undeploy
undeploy: build ## Remove what deploy installed but the CRD and every WebApp, which are kept; UNDEPLOY_DELETE_WEBAPPS=true removes them too, in order: every WebApp (only handroll's finalizer removed; UNDEPLOY_FORCE_FINALIZERS=true: every one), the operator, the rest, the CRD last.
ifneq ($(strip $(KUBECONFIG)),)
	hack/deploy.sh undeploy "$(or $(KUSTOMIZE_DIR),manifests/default)" "$(IMG)"
else
	KUBECONFIG="$(LOCAL_KUBECONFIG)" hack/deploy.sh undeploy "$(or $(KUSTOMIZE_DIR),manifests/local)" "$(IMG)"
endif

# One file to install handroll with `kubectl apply -f`, for a release:
# manifests/default (or KUSTOMIZE_DIR) with the image IMG, rendered by
# hack/deploy.sh as deploy applies it. INSTALLER: where it is written.
INSTALLER ?= dist/install.yaml

.PHONY: build-installer
build-installer: ## Write manifests/default with the image IMG into one YAML file, dist/install.yaml (or INSTALLER); no cluster needed.
	@mkdir -p "$(dir $(INSTALLER))"
	hack/deploy.sh render "$(or $(KUSTOMIZE_DIR),manifests/default)" "$(IMG)" >"$(INSTALLER).tmp" || { rm -f "$(INSTALLER).tmp"; exit 1; }
	@mv -f "$(INSTALLER).tmp" "$(INSTALLER)"
	@echo "wrote $(INSTALLER) with the image $(IMG)"

##@ Release

# make release VERSION=vX.Y.Z writes into RELEASE_DIR, with no cluster and no
# container engine: handroll-image.tar (the image index, tagged
# RELEASE_REPO:VERSION), install.yaml (manifests/default with the image by
# digest), handroll-X.Y.Z.tgz (the chart, its image by tag and digest),
# sbom.spdx.json (SPDX 2.3, made by syft: the binaries' Go modules with their
# licences), provenance.slsa.json (SLSA v1 provenance, docs/sbom.md),
# SHA256SUMS, and with COSIGN_KEY a signature bundle
# (FILE.sigstore.json) of install.yaml, the chart and SHA256SUMS, and
# cosign.pub. A version names one artifact: a version that was cut
# (hack/releases: its tag, else the commit that set VERSION to it) builds
# only from that commit's tree; a -dev version is a development build.
# make release-publish then pushes the image and the chart (OCI) beside it,
# signs both and attaches the SBOM and provenance as signed attestations.
# Signing is with a key (cosign generate-key-pair; COSIGN_PASSWORD in the
# environment), never keyless, and nothing goes to a transparency log:
# keyless signing and the log need the internet (docs/verify.md).
RELEASE_REPO        ?= ghcr.io/handroll/handroll
# The chart is pushed beside the image: RELEASE_CHARTS/handroll:X.Y.Z.
RELEASE_CHARTS      ?= $(patsubst %/,%,$(dir $(RELEASE_REPO)))/charts
# Where release-publish pushes, when it reaches the registry at another
# address than clusters pull from (a mirror, a port-forward).
PUBLISH_REPO        ?= $(RELEASE_REPO)
PUBLISH_CHARTS      ?= $(patsubst %/,%,$(dir $(PUBLISH_REPO)))/charts
RELEASE_DIR         ?= dist
RELEASE_ALLOW_DIRTY ?= false
COSIGN_KEY          ?=
# Read once, so that every step stamps the same commit and time.
RELEASE_PINS = GIT_COMMIT=$(GIT_COMMIT) GIT_TREE_STATE=$(GIT_TREE_STATE) SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH)
RELEASE_DEV  = $(findstring -,$(VERSION))
# Files signed as blobs; the image is signed in its registry.
RELEASE_SIGNED = install.yaml handroll-$(patsubst v%,%,$(VERSION)).tgz SHA256SUMS

# cosign asks for the key's password on a terminal; a job has none, and
# cosign's own error then ("inappropriate ioctl for device") names nothing.
cosign-password = if [[ -n "$(COSIGN_KEY)" && -z "$${COSIGN_PASSWORD+set}" && ! -t 0 ]]; then \
	  echo "$(1): COSIGN_PASSWORD is not set and there is no terminal to ask for the password of $(COSIGN_KEY): set it (empty for a key without one)" >&2; exit 1; fi

.PHONY: release
release: $(COSIGN) ## Write the release VERSION (= the VERSION file) into dist/: image archive, install.yaml, chart, SBOM, provenance, SHA256SUMS, and with COSIGN_KEY their signatures.
	@$(GO) build -o bin/releases ./hack/releases && bin/releases check $(VERSION)
	@file="$$(cat VERSION)"; if [[ "$(VERSION)" != "$$file" ]]; then \
	  echo "release: VERSION=$(VERSION), but the VERSION file holds $$file: change the file (and CHANGELOG.md) in a commit, then release from it" >&2; exit 1; \
	fi
	@if [[ ! "$(VERSION)" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$ ]]; then \
	  echo "release: VERSION=$(VERSION) is not a semantic version such as v0.1.0" >&2; exit 1; \
	fi
	@if [[ "$(GIT_TREE_STATE)" != clean && "$(RELEASE_ALLOW_DIRTY)" != true ]]; then \
	  echo "release: the tree is $(or $(GIT_TREE_STATE),not a git checkout): commit first (RELEASE_ALLOW_DIRTY=true to build anyway)" >&2; exit 1; \
	fi
	@if [[ -n "$(RELEASE_DEV)" ]]; then echo "release: $(VERSION) is a development build, not a release"; \
	elif [[ -z "$(COSIGN_KEY)" ]]; then \
	  echo "release: $(VERSION) is a release and COSIGN_KEY is not set: a release is signed (docs/releasing.md)" >&2; exit 1; fi
	@$(call cosign-password,release)
	rm -rf "$(RELEASE_DIR)" && mkdir -p "$(RELEASE_DIR)"
	@$(MAKE) --no-print-directory image IMG=$(RELEASE_REPO):$(VERSION) $(RELEASE_PINS)
	cp $(IMAGE_DIR)/handroll.tar "$(RELEASE_DIR)/handroll-image.tar"
	@$(MAKE) --no-print-directory build-installer IMG=$(RELEASE_REPO)@$$(cat $(IMAGE_DIR)/handroll.tar.digest) INSTALLER=$(RELEASE_DIR)/install.yaml
	@$(MAKE) --no-print-directory chart-package CHART_OUT=$(abspath $(RELEASE_DIR)) \
	  CHART_IMG=$(RELEASE_REPO):$(VERSION)@$$(cat $(IMAGE_DIR)/handroll.tar.digest) $(RELEASE_PINS)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) -C hack/release run . --dir $(abspath $(RELEASE_DIR)) --version $(VERSION) --commit $(GIT_COMMIT) \
	  --digest $$(cat $(IMAGE_DIR)/handroll.tar.digest) --license $(CURDIR)/LICENSE $(foreach p,$(IMAGE_PLATFORMS),--binary $(CURDIR)/bin/handroll-$(subst /,-,$(p)))
	@if [[ -n "$(COSIGN_KEY)" ]]; then \
	  "$(COSIGN)" public-key --key "$(COSIGN_KEY)" >"$(RELEASE_DIR)/cosign.pub"; \
	  for f in $(RELEASE_SIGNED); do \
	    "$(COSIGN)" sign-blob --yes --key "$(COSIGN_KEY)" $(COSIGN_OFFLINE) --bundle "$(RELEASE_DIR)/$$f.sigstore.json" "$(RELEASE_DIR)/$$f" >/dev/null; \
	    chmod 0644 "$(RELEASE_DIR)/$$f.sigstore.json"; \
	    echo "signed $$f: $(RELEASE_DIR)/$$f.sigstore.json"; \
	  done; \
	fi
	@cat "$(RELEASE_DIR)/SHA256SUMS"

# make release-publish pushes what make release wrote: the image to
# RELEASE_REPO:VERSION (its digest checked against the archive's), the chart
# to oci://RELEASE_CHARTS, then signs both with COSIGN_KEY (the image's
# index and every platform's manifest) and attaches the SBOM and the
# provenance to the image as signed in-toto attestations. Registry
# credentials: docker login (DOCKER_CONFIG); REGISTRY_INSECURE=true allows
# plain HTTP to a loopback registry.
.PHONY: release-publish
release-publish: $(COSIGN) $(HELM) ## Push dist/'s image and chart to RELEASE_REPO and RELEASE_CHARTS, sign both and attach the SBOM and provenance (COSIGN_KEY).
	@if [[ -z "$(COSIGN_KEY)" ]]; then echo "release-publish: COSIGN_KEY is not set: what is published is signed" >&2; exit 1; fi
	@$(call cosign-password,release-publish)
	@cd "$(RELEASE_DIR)" && sha256sum --quiet -c SHA256SUMS || { echo "release-publish: $(RELEASE_DIR) does not hold what its SHA256SUMS lists: make release first" >&2; exit 1; }
	@digest="$$($(MAKE) --no-print-directory image-push PUSH_ARCHIVE=$(abspath $(RELEASE_DIR))/handroll-image.tar IMG=$(PUBLISH_REPO):$(VERSION) | tail -n 1)"; \
	if ! grep -qF "$(RELEASE_REPO)@$$digest" "$(RELEASE_DIR)/install.yaml"; then \
	  echo "release-publish: pushed $$digest, which is not the image $(RELEASE_DIR)/install.yaml runs: make release RELEASE_REPO=$(RELEASE_REPO) first" >&2; exit 1; fi; \
	image="$(PUBLISH_REPO)@$$digest"; \
	"$(COSIGN)" sign --yes --key "$(COSIGN_KEY)" $(COSIGN_OFFLINE) $(COSIGN_REGISTRY) --recursive "$$image"; \
	"$(COSIGN)" attest --yes --key "$(COSIGN_KEY)" $(COSIGN_OFFLINE) $(COSIGN_REGISTRY) --type spdxjson --predicate "$(RELEASE_DIR)/sbom.spdx.json" "$$image"; \
	"$(COSIGN)" attest --yes --key "$(COSIGN_KEY)" $(COSIGN_OFFLINE) $(COSIGN_REGISTRY) --type slsaprovenance1 --predicate "$(RELEASE_DIR)/provenance.slsa.json" "$$image"; \
	chart="$$("$(HELM)" push "$(RELEASE_DIR)/handroll-$(patsubst v%,%,$(VERSION)).tgz" "oci://$(PUBLISH_CHARTS)" $(if $(filter true,$(REGISTRY_INSECURE)),--plain-http) 2>&1 | tee /dev/stderr | awk '$$1 == "Digest:" { print $$2 }')"; \
	if [[ -z "$$chart" ]]; then echo "release-publish: helm push printed no digest" >&2; exit 1; fi; \
	"$(COSIGN)" sign --yes --key "$(COSIGN_KEY)" $(COSIGN_OFFLINE) $(COSIGN_REGISTRY) "$(PUBLISH_CHARTS)/handroll@$$chart"; \
	echo "published $$image and oci://$(PUBLISH_CHARTS)/handroll:$(patsubst v%,%,$(VERSION)) ($$chart), signed"

##@ Run

LOCAL_KUBECONFIG := $(CURDIR)/.local/kubeconfig
RUN_FLAGS ?= --metrics-bind-address=127.0.0.1:8080 --health-probe-bind-address=127.0.0.1:8081

# With KUBECONFIG set (in the environment or on the command line), run against
# that cluster, safely beside its own replicas: no webhooks are served here
# and no webhook configuration is changed, unless WEBHOOK_URL (an address at
# which that API server reaches this machine) asks for it; they are pointed
# back when the process stops. Without KUBECONFIG, bring up the local
# cluster, install the CRD, the webhook configurations and the samples, and
# serve the webhooks at WEBHOOK_URL, by default https://127.0.0.1:WEBHOOK_PORT
# (hack/run-local.sh).
WEBHOOK_PORT ?= 9443
WEBHOOK_URL  ?=
export WEBHOOK_PORT WEBHOOK_URL

.PHONY: run
run: build ## Run the operator: against KUBECONFIG if set, else on the local cluster (started if needed).
ifneq ($(strip $(KUBECONFIG)),)
	hack/run-local.sh "$(KUBECONFIG)" $(RUN_FLAGS) $(ARGS)
else
	@$(MAKE) --no-print-directory cluster-up
	LOCAL=1 hack/run-local.sh "$(LOCAL_KUBECONFIG)" $(RUN_FLAGS) $(ARGS)
endif
