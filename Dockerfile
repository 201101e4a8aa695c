# syntax=docker/dockerfile:1
#
# orchd's container image: a static binary on distroless (CA certificates,
# /etc/passwd with the nonroot user, no shell), run as nonroot (65532), the
# state directory a volume. docs/install.md says how to build and run it.
#
#   docker build -t orchd .
#   docker run -p 8080:8080 -v orchd-state:/var/lib/orchd orchd

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static (no cgo), without local paths or symbols. The build context
# carries .git (.dockerignore leaves it in) and the image has git, so
# -buildvcs=auto stamps the commit, its time and whether the tree was
# modified into the binary, and `orchd version` reports them; a context
# without .git builds all the same, unstamped. A git worktree's .git points
# outside the context: build it with --build-arg BUILDVCS=false.
ARG BUILDVCS=auto
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -buildvcs=${BUILDVCS} -ldflags='-s -w' -o /out/usr/local/bin/orchd ./cmd/orchd
# The directories the image needs, owned by nonroot: the state directory
# (a new volume takes its owner from the image) and the tokens directory.
RUN mkdir -p /out/var/lib/orchd /out/etc/orchd/tokens
COPY packaging/docker/orchd.yaml /out/etc/orchd/orchd.yaml
COPY packaging/docker/tokens.yaml /out/etc/orchd/tokens/tokens.yaml

FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/usr/local/bin/orchd /usr/local/bin/orchd
COPY --from=build /out/etc/orchd /etc/orchd
COPY --from=build --chown=65532:65532 /out/var/lib/orchd /var/lib/orchd
USER 65532:65532
# The identity, the embedded store's delegations, agents and A2A tasks.
VOLUME ["/var/lib/orchd"]
# The HTTP API, the A2A endpoints, /metrics and the health routes.
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/orchd", "healthcheck", "http://127.0.0.1:8080/readyz"]
ENTRYPOINT ["/usr/local/bin/orchd"]
CMD ["serve", "--config", "/etc/orchd/orchd.yaml"]
