# coregate's container image: the static binary (make static's go build)
# on distroless/static, run as its nonroot user (65532).
#
#   docker build -t coregate .
#   docker run -d -p 9080:9080 --cap-add BPF -v coregate-data:/var/lib/coregate coregate
#
# /etc/coregate/config.yaml is conf/config.yaml: mount your own over it (the
# image's serves the Admin API on the container's loopback only). The
# embedded etcd keeps its data in the volume /var/lib/coregate.
# Capabilities (packaging/doc.go): ports below 1024 need none under Docker,
# which sets net.ipv4.ip_unprivileged_port_start=0 in the container
# (elsewhere: --cap-add NET_BIND_SERVICE); the eBPF socket selector needs
# CAP_BPF in the process: --cap-add BPF where the engine grants added
# capabilities to a non-root user (ambient), or --user 0 --cap-drop ALL
# --cap-add BPF --cap-add NET_BIND_SERVICE where it does not. Without it
# the node logs "eBPF socket selector unavailable" and serves with the
# kernel's SO_REUSEPORT spreading.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY third_party ./third_party
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/coregate ./cmd/coregate
RUN CGO_ENABLED=0 go build -trimpath -o /out/coregate-probe ./cmd/probe
RUN mkdir -p /out/etc/coregate /out/var/lib/coregate && cp conf/config.yaml conf/apisix.yaml /out/etc/coregate/

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/coregate /out/coregate-probe /usr/bin/
# The node writes its id and its copy of the configuration beside
# config.yaml.
COPY --from=build --chown=nonroot:nonroot /out/etc/coregate /etc/coregate
COPY --from=build --chown=nonroot:nonroot /out/var/lib/coregate /var/lib/coregate
USER nonroot:nonroot
VOLUME /var/lib/coregate
# node_listen (HTTP) and TLS; the Admin API, the Control API and the
# metrics listen on the container's loopback in the image's config.yaml.
EXPOSE 9080 9443
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s CMD ["/usr/bin/coregate-probe", "http://127.0.0.1:9090/v1/server_info"]
ENTRYPOINT ["/usr/bin/coregate", "-c", "/etc/coregate/config.yaml", "--etcd-data", "/var/lib/coregate/etcd-data"]
