# mysqlha: Patroni-style HA agent for MySQL and MariaDB.
#
# make test   installs what the tests need (mariadb-server, mariadb-backup, the real
#             node's packages via apt-get, the Kubernetes binaries built from
#             Go modules into bin/), then runs lint and every test against
#             real servers, a real node included.
# make bench  prints the benchmarks' figures.
# make e2e    the end-to-end tests alone, the fault scenarios on the real
#             node included.
# make bench-failover  the fault scenarios, 4 trials each, and their report.
# make image  the release's container images, as OCI archives in bin/images.

GO           ?= go
KUBE_VERSION := v1.37.2
KUBE_BIN     := bin/k8s-$(KUBE_VERSION)
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TEST_TIMEOUT ?= 80m
FUZZTIME     ?= 15s

export KUBE_BIN_DIR := $(CURDIR)/$(KUBE_BIN)

.PHONY: all build test unit lint staticcheck bench e2e bench-failover fuzz deps mariadb node-packages kube-bin promtool test-packages image clean

all: build

## build: the agent, agentctl and agentctl as a kubectl plugin, each
## reporting VERSION (agentctl version, the member records).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS := $(if $(VERSION),-X github.com/mysqlha/mysqlha/internal/version.Version=$(VERSION))
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/mysqlha-agent ./cmd/agent
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/agentctl ./cmd/agentctl
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kubectl-mysqlha ./cmd/kubectl-mysqlha
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kubectl_complete-mysqlha ./cmd/kubectl_complete-mysqlha

## image: the release's two images, the agent (VERSION linked in) and
## MariaDB 10.11 from Debian packages, as OCI archives in bin/images, built
## here without Docker (tools/release-images: root and debootstrap).
image: node-packages
	$(GO) run ./tools/release-images --version=$(VERSION) --out=bin/images

## test: everything, against real MariaDB, etcd and kube-apiserver. One package
## at a time (-p 1): the failover tests measure timing on 2 cores. The HA
## loop's packages run first under the race detector (they are fast, and the
## agent's goroutines share state). tools/testtime prints what go test would,
## then the time each package and the slowest tests took.
test:
	@start=$$(date +%s); $(MAKE) --no-print-directory deps lint && \
		echo "make test: installs, builds and lint took $$(( $$(date +%s) - start ))s"
	@start=$$(date +%s); $(GO) test -count=1 -race ./agent/ ./failover/ ./ctl/ && \
		echo "make test: the race detector's run took $$(( $$(date +%s) - start ))s"
	$(GO) build -o bin/testtime ./tools/testtime
	bash -o pipefail -c '$(GO) test -json -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./... | bin/testtime'

## unit: the fast tests that need no server.
unit:
	$(GO) test -count=1 -short ./...

lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

## staticcheck: v0.8.2 from the module proxy (also part of lint).
staticcheck:
	$(GO) run $(STATICCHECK) ./...

bench: deps
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 2s -timeout $(TEST_TIMEOUT) ./...

## e2e: the end-to-end tests alone: local clusters (e2e/) and the fault
## scenarios on the real node (e2e/onnode), E2E_TRIALS (3) trials each.
E2E_TRIALS ?= 3
e2e: deps
	$(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./e2e/... | grep -v /e2e/onnode$$)
	$(GO) test -count=1 -timeout $(TEST_TIMEOUT) ./e2e/onnode/ -args -onnode.trials=$(E2E_TRIALS) -onnode.long

## bench-failover: every fault scenario on the real node, FAILOVER_TRIALS
## trials each, then a report per scenario: detect, promote and route
## percentiles, the client's longest outage (with its target, met or
## missed), the time to a healthy cluster, writes lost, the most members
## writable and routable at once. The rebuild scenarios run against a
## database of FAILOVER_DATA_MB.
FAILOVER_TRIALS ?= 4
FAILOVER_DATA_MB ?= 1024
FAILOVER_REPORT := $(CURDIR)/bin/failover-report.txt
bench-failover: deps
	@mkdir -p bin && rm -f $(FAILOVER_REPORT)
	$(GO) test -count=1 -v -timeout $(TEST_TIMEOUT) ./e2e/onnode/ \
		-args -onnode.trials=$(FAILOVER_TRIALS) -onnode.long -onnode.data-mb=$(FAILOVER_DATA_MB) -onnode.report=$(FAILOVER_REPORT) > bin/failover-bench.log 2>&1; \
		status=$$?; cat $(FAILOVER_REPORT); grep -E -- '^(--- FAIL|FAIL|ok)' bin/failover-bench.log; \
		echo "full log: bin/failover-bench.log"; exit $$status

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseSet -fuzztime $(FUZZTIME) ./mysqlctl/gtid/
	$(GO) test -run '^$$' -fuzz FuzzParseMariaDBPos -fuzztime $(FUZZTIME) ./mysqlctl/gtid/
	$(GO) test -run '^$$' -fuzz FuzzSetAlgebra -fuzztime $(FUZZTIME) ./mysqlctl/gtid/
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME) ./dcs/internal/record/
	$(GO) test -run '^$$' -fuzz FuzzLeaderKey -fuzztime $(FUZZTIME) ./dcs/etcd/
	$(GO) test -run '^$$' -fuzz FuzzLeaderLease -fuzztime $(FUZZTIME) ./dcs/kubernetes/
	$(GO) test -run '^$$' -fuzz FuzzFailsafeHTTP -fuzztime $(FUZZTIME) ./agent/
	$(GO) test -run '^$$' -fuzz FuzzPeerStatus -fuzztime $(FUZZTIME) ./agent/

deps: mariadb node-packages test-packages kube-bin promtool

## mariadb: Debian's mariadb-server, and mariadb-backup (mariabackup and
## mbstream, for agentctl reinit), installed only when missing.
mariadb:
	@if ! PATH="$$PATH:/usr/sbin" command -v mariadbd >/dev/null 2>&1 || ! command -v mariabackup >/dev/null 2>&1; then \
		echo "installing mariadb-server and mariadb-backup with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server mariadb-backup >/dev/null; \
	fi

## node-packages: what the real single-node Kubernetes of the tests runs on
## (containerd, runc, the CNI plugins, iptables, iproute2) and what builds
## the MariaDB image (debootstrap), from Debian, installed only when missing.
NODE_PACKAGES := containerd runc containernetworking-plugins iptables iproute2 debootstrap
node-packages:
	@missing=$$(for p in $(NODE_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

## test-packages: what a test runs beside the product: Debian's haproxy
## (e2e/haproxy_test.go runs the example docs/haproxy.cfg) and openssl
## (deploy/tls/make-api-tls.sh makes the test node's API certificates),
## installed only when missing.
TEST_PACKAGES := haproxy openssl
test-packages:
	@missing=$$(for p in $(TEST_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing $$missing with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

## promtool: Prometheus' rule checker, for the alert rules' unit tests
## (deploy/alerts_test.go). The binary alone, taken from Debian's
## prometheus package into bin/: the package itself is not installed (it
## would start a Prometheus server).
export PROMTOOL := $(CURDIR)/bin/promtool
promtool: $(PROMTOOL)

$(PROMTOOL):
	@echo "extracting promtool from Debian's prometheus package into bin/"
	@rm -rf bin/.promtool && mkdir -p bin/.promtool && cd bin/.promtool && \
		{ apt-get download prometheus >/dev/null 2>&1 || { apt-get update -qq && apt-get download prometheus >/dev/null; }; } && \
		dpkg-deb -x prometheus_*.deb root && mv root/usr/bin/promtool $(PROMTOOL)
	@rm -rf bin/.promtool

## kube-bin: the control plane (kube-apiserver, kube-controller-manager,
## kube-scheduler) and the node (kubelet, kube-proxy), built from
## k8s.io/kubernetes in the tools/kube module (its own go.mod keeps
## k8s.io/kubernetes out of ours). About 10 min cold, seconds when cached.
KUBE_CMDS := kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy
kube-bin: $(addprefix $(KUBE_BIN)/,$(KUBE_CMDS))

$(addprefix $(KUBE_BIN)/,$(KUBE_CMDS)) &: tools/kube/go.mod tools/kube/go.sum
	@echo "building $(KUBE_CMDS) $(KUBE_VERSION) into $(KUBE_BIN) (about 10 min the first time)"
	cd tools/kube && $(GO) build -ldflags "-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)" \
		-o $(CURDIR)/$(KUBE_BIN)/ $(addprefix k8s.io/kubernetes/cmd/,$(KUBE_CMDS))

clean:
	rm -rf bin/

## ---- demo ------------------------------------------------------------------
## demo       a local 3-member cluster (MariaDB + agents) on an embedded etcd:
##            status through agentctl, a failover drill, then keeps running
##            until Ctrl-C or `make demo-stop`, which remove everything.
## demo-k8s   the same on the local kube-apiserver of the tests (Leases, pod
##            labels, the primary Service's endpoints).
## demo-ci    non-interactive: checks bootstrap, drill and rejoin, then stops.
## demo-stop  stops a running demo (either kind) and waits for its clean-up.

DEMO_DIR ?= /tmp/mysqlha-demo
DEMO_CI_DIR ?= /tmp/mysqlha-demo-ci
# Extra flags, e.g. DEMO_FLAGS="--etcd-port=12379 --mysql-port=13307 --api-port=18008"
# (bin/mysqlha-demo --help lists them).
DEMO_FLAGS ?=

.PHONY: demo demo-k8s demo-ci demo-stop

# The demo's preparation, shared by its targets: the existing mariadb and
# build targets, plus the supervisor binary, each announced and timed so that
# a first run (apt-get, a cold Go build) shows what it is waiting for.
define demo_prepare
	@t=$$(date +%s); \
	if ! PATH="$$PATH:/usr/sbin" command -v mariadbd >/dev/null 2>&1; then \
		echo "[make] mariadbd not found: installing Debian's mariadb-server with apt-get (about a minute)"; \
		$(MAKE) --no-print-directory mariadb || exit 1; \
		echo "[make] mariadb-server installed in $$(( $$(date +%s) - t ))s"; \
	fi
	@t=$$(date +%s); \
	echo "[make] building bin/mysqlha-agent, bin/agentctl, bin/kubectl-mysqlha and bin/mysqlha-demo (a cold build compiles etcd and client-go: a few minutes; then seconds)"; \
	$(MAKE) --no-print-directory build && $(GO) build -o bin/mysqlha-demo ./cmd/demo || exit 1; \
	echo "[make] binaries ready in $$(( $$(date +%s) - t ))s"
endef

demo:
	$(demo_prepare)
	@bin/mysqlha-demo --dir=$(DEMO_DIR) $(DEMO_FLAGS)

demo-k8s:
	$(demo_prepare)
	@if [ ! -x $(KUBE_BIN)/kube-apiserver ] || [ ! -x $(KUBE_BIN)/kube-controller-manager ]; then \
		echo "[make] kube-apiserver and kube-controller-manager $(KUBE_VERSION) are not built yet: building them (about 8 min the first time)"; \
	fi
	@$(MAKE) --no-print-directory -s kube-bin
	@bin/mysqlha-demo --k8s --dir=$(DEMO_DIR) $(DEMO_FLAGS)

demo-ci:
	$(demo_prepare)
	@bin/mysqlha-demo --ci --dir=$(DEMO_CI_DIR) --etcd-port=0 --mysql-port=0 --api-port=0 $(DEMO_FLAGS)

demo-stop:
	@[ -x bin/mysqlha-demo ] || $(GO) build -o bin/mysqlha-demo ./cmd/demo
	@bin/mysqlha-demo --stop --dir=$(DEMO_DIR)
