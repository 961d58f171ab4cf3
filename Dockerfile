# The operator's image: a static binary on an empty base, run as a non-root
# user, matching the restricted Pod Security profile manifests/manager asks for.
#   docker build -t handroll:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.0.0-dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /handroll ./cmd/handroll

FROM scratch
COPY --from=build /handroll /handroll
USER 65532:65532
ENTRYPOINT ["/handroll"]
