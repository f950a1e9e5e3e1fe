# Builds the engine from source. docker compose up uses it (see docker-compose.yml).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /engine ./cmd/engine

# distroless static, as the non-root user nonroot (65532): no shell, no root.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /engine /engine
USER nonroot:nonroot
# An embedded server (serve without --nats) keeps its data in ./engine-data
# of this directory, owned by nonroot: mount a volume at
# /home/nonroot/engine-data to keep it.
WORKDIR /home/nonroot
EXPOSE 7420
ENTRYPOINT ["/engine"]
# The engine binary is its own healthcheck (no shell or curl in the image).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 CMD ["/engine", "healthcheck"]
# Off loopback the HTTP API needs bearer tokens: mount a tokens file (see
# deploy/http-tokens.json) at /etc/engine/http-tokens.json.
CMD ["serve", "--http", "0.0.0.0:7420", "--http-tokens", "/etc/engine/http-tokens.json"]
