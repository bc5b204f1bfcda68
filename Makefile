# coregate — see README.md. The first two commands on a fresh machine are
# `make run` and `make test`.

GO      ?= go
BIN     := bin
PKGS    := ./...
# The carried gnet's packages that have coregate's tests (third_party/gnet/COREGATE.md).
GNET_PKGS := github.com/panjf2000/gnet/v2/pkg/netpoll github.com/panjf2000/gnet/v2/pkg/io
export GOTOOLCHAIN := local

.PHONY: build run test alloc check fuzz bench bench-deps bench-bundle microbench soak chaos cluster-test cross static install deb clean

# coregate -V's commit, stamped: GOFLAGS=-buildvcs=false turns go build's own off.
LDFLAGS ?= -X main.commit=$(shell git rev-parse HEAD 2>/dev/null)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/coregate ./cmd/coregate
	$(GO) build -o $(BIN)/demoupstream ./cmd/demoupstream

# Starts the demo upstream on 127.0.0.1:1980 and the gateway on :9080 with
# conf/config.yaml (embedded etcd, Admin API on 127.0.0.1:9180), then puts
# the example route /hello through the Admin API, as APISIX's benchmark
# scripts do. Ctrl-C stops both. conf/apisix.yaml is the same route for a
# data plane (deployment.role: data_plane, config_provider: yaml).
ADMIN_KEY := edd1c9f034335f136f87ad84b625c8f1
run: build
	@set -e; \
	$(BIN)/demoupstream -listen 127.0.0.1:1980 & up=$$!; \
	$(BIN)/coregate -c conf/config.yaml & gw=$$!; \
	trap 'kill $$up $$gw 2>/dev/null; wait $$gw 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq 100); do \
	  curl -fs -o /dev/null http://127.0.0.1:9180/apisix/admin/routes -H 'X-API-KEY: $(ADMIN_KEY)' && break; \
	  kill -0 $$gw 2>/dev/null || exit 1; sleep 0.1; \
	done; \
	curl -fsS -o /dev/null http://127.0.0.1:9180/apisix/admin/routes/1 -H 'X-API-KEY: $(ADMIN_KEY)' -X PUT -d \
	  '{"uri": "/hello", "upstream": {"type": "roundrobin", "nodes": {"127.0.0.1:1980": 1}}}'; \
	echo; echo "coregate: try   curl -i http://127.0.0.1:9080/hello"; echo; \
	wait $$gw

# Everything: the allocation guards (built without the race detector, which
# allocates), then every test with the race detector. SERIAL_PKGS run one
# package at a time, nothing beside them: their scheduling, latency,
# respawn and fixed-rate tests measure a worker or a load generator on a
# 2-core machine; so does bench/harness's TestPair, which pins a benchmark
# pair to the CPUs and judges 300 ms windows (the rest of that package
# says it does not wait for a quiet machine). The other packages then run
# four at once, and in each the parallel tests eight at once: the
# end-to-end package's (cmd/coregate) mostly wait on processes and
# sockets; its tests that measure timing or pin workers to CPUs are not
# parallel, and run first, before its parallel ones start.
SERIAL_PKGS := ./worker ./node/supervisor ./bench/load
# The longest package of the rest, named first so that it is built and
# started first, the others running beside it.
FIRST_PKGS := ./cmd/coregate
test:
	$(GO) test -count=1 -run 'Alloc' $(PKGS) $(GNET_PKGS)
	$(GO) test -race -shuffle=on -count=1 -p 1 -timeout 20m $(SERIAL_PKGS)
	$(GO) test -race -count=1 -run '^TestPair$$' ./bench/harness
	$(GO) test -race -shuffle=on -count=1 -p 4 -parallel 8 -timeout 20m -skip '^TestPair$$' \
	  $$($(GO) list $(FIRST_PKGS); $(GO) list $(PKGS) | grep -vxF "$$($(GO) list $(SERIAL_PKGS) $(FIRST_PKGS))")
	$(GO) test -race -count=1 $(GNET_PKGS)

alloc:
	$(GO) test -count=1 -run 'Alloc' -v $(PKGS) $(GNET_PKGS)

# gofmt, vet, staticcheck, the import rules (cmd/layering: which
# package may import which, read from go list), and the carried gnet: the
# v2.9.7 release with third_party/gnet/patches applied, byte for byte
# (scripts/gnet-patches).
check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt:"; echo "$$out"; exit 1; fi
	GO=$(GO) ./scripts/gnet-patches check
	GO=$(GO) ./scripts/gnet-patches selftest
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	$(GO) test -count=1 ./cmd/layering

FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./... ); do \
	  for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

# The benchmark harness: coregate beside nginx on the same upstream and load.
bench:
	./bench/run $(BENCHFLAGS)

# nginx, wrk and redis-server from Debian, the flame graph renderer (stackvis) from npm.
bench-deps:
	./bench/deps

# Soak: mixed load at 70 % of the measured maximum for SOAK (default 30m;
# SOAK=60s for a short run), a reload every 10 s; fails on RSS drift, fd
# growth, 5xx, unanswered requests, p99 drift. Chaos: one fault at a time
# under steady load, a table of failed and explained requests; fails on any
# failure a fault does not explain. bench/README.md says what each measures.
SOAK ?= 30m
soak: build
	$(GO) build -o bench/.bin/soak ./bench/cmd/soak
	bench/.bin/soak -d $(SOAK) $(SOAKFLAGS)

chaos: build
	$(GO) build -o bench/.bin/soak ./bench/cmd/soak
	bench/.bin/soak chaos $(CHAOSFLAGS)

# A cluster on one machine (root, ip netns): scripts/cluster.sh up, the
# scenarios of issue 41 (a change on the control plane served on three data
# planes, limit-count over Redis and Redis Cluster, etcd members, Redis and
# a data plane stopped or cut off), a table of figures, down. CLUSTER=short
# runs each scenario with fewer iterations.
cluster-test: build
	$(GO) build -o bench/.bin/cluster ./bench/cmd/cluster
	bench/.bin/cluster $(CLUSTERFLAGS)

# bench pair on a host without Go or nginx: bin/bench-bundle.tar.xz
# (bench/bundle says what it holds and how to run it there).
bench-bundle:
	./bench/bundle

# Go micro-benchmarks (parser, router, whole request path).
microbench:
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./httpparse ./worker/...

cross:
	GOOS=linux GOARCH=amd64 CGO_ENABLED=0 $(GO) build -o $(BIN)/coregate-linux-amd64 ./cmd/coregate
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o $(BIN)/coregate-linux-arm64 ./cmd/coregate

# Packages (packaging/doc.go). static is the binary that make install and
# make deb ship; the Dockerfile runs the same go build (its test checks).
# install is PREFIX- and DESTDIR-aware: the binary to $(PREFIX)/bin, the
# systemd unit to $(UNITDIR), config.yaml and apisix.yaml to
# $(SYSCONFDIR)/coregate unless there already; without DESTDIR it creates
# the coregate user the unit runs as (packaging/adduser).
PREFIX     ?= /usr/local
SYSCONFDIR ?= /etc
UNITDIR    ?= $(PREFIX)/lib/systemd/system
VERSION    ?= 0.0.0+git$(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
static:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/coregate-static ./cmd/coregate

install: static
	install -D -m 0755 $(BIN)/coregate-static $(DESTDIR)$(PREFIX)/bin/coregate
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/bin/coregate|$(PREFIX)/bin/coregate|g' -e 's|/etc/coregate|$(SYSCONFDIR)/coregate|g' \
	  packaging/coregate.service > $(DESTDIR)$(UNITDIR)/coregate.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/coregate.service
	install -d -m 1770 $(DESTDIR)$(SYSCONFDIR)/coregate
	@for f in config.yaml apisix.yaml; do \
	  if [ -e $(DESTDIR)$(SYSCONFDIR)/coregate/$$f ]; then echo "install: $(SYSCONFDIR)/coregate/$$f kept as it is"; \
	  else install -m 0640 conf/$$f $(DESTDIR)$(SYSCONFDIR)/coregate/$$f; fi; \
	done
	@if [ -z "$(DESTDIR)" ]; then packaging/adduser $(SYSCONFDIR)/coregate; \
	else echo "install: DESTDIR set: create the coregate user and chgrp $(SYSCONFDIR)/coregate to it on the target (packaging/adduser)"; fi

# bin/coregate_$(VERSION)_amd64.deb (GOARCH's), built by nfpm (a tool of go.mod).
deb: static
	sed 's|@BIN@|$(BIN)|' packaging/nfpm.yaml > $(BIN)/nfpm.yaml
	VERSION=$(VERSION) GOARCH=$$($(GO) env GOARCH) $(GO) tool nfpm package -f $(BIN)/nfpm.yaml -p deb -t $(BIN)/

clean:
	rm -rf $(BIN)
