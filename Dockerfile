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
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-X main.version=$VERSION" -o /out/handroll ./cmd/handroll

FROM scratch
COPY --from=build /out/handroll /handroll
USER 65532:65532
ENTRYPOINT ["/handroll"]
