# The operator's image, for those with a container engine: handroll built
# from the sources for the target platform, on an empty base, run as a
# non-root user. `make docker-build` builds it for this machine's platform;
# `docker buildx build --platform linux/amd64,linux/arm64 .` for both.
# `make image` builds the same image without a container engine.

# The builder runs on the build platform and cross-compiles (no cgo), so a
# multi-platform build needs no emulation. Its Go is the go.mod's version.
FROM --platform=$BUILDPLATFORM golang:1.26.0 AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=
ARG GIT_TREE_STATE=
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-X main.version=$VERSION -X main.gitCommit=$GIT_COMMIT -X main.gitTreeState=$GIT_TREE_STATE" \
      -o /out/handroll ./cmd/handroll

FROM scratch
ARG VERSION=v0.0.0-dev
ARG GIT_COMMIT=
LABEL org.opencontainers.image.title=handroll \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$GIT_COMMIT \
      org.opencontainers.image.source=github.com/handroll/handroll \
      org.opencontainers.image.licenses=Apache-2.0
COPY --from=build /out/handroll /handroll
USER 65532:65532
ENTRYPOINT ["/handroll"]
