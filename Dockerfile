# The operator's image: the static binary `make build` makes, on an empty
# base, run as a non-root user — nothing to pull. Build it with
# `make docker-build`.
FROM scratch
COPY bin/handroll /handroll
USER 65532:65532
ENTRYPOINT ["/handroll"]
