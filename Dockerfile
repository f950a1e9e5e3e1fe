# Builds the engine from source. docker compose up uses it (see docker-compose.yml).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /engine ./cmd/engine

FROM gcr.io/distroless/static-debian12
COPY --from=build /engine /engine
EXPOSE 7420
ENTRYPOINT ["/engine"]
# Off loopback the HTTP API needs bearer tokens: mount a tokens file (see
# deploy/http-tokens.json) at /etc/engine/http-tokens.json.
CMD ["serve", "--http", "0.0.0.0:7420", "--http-tokens", "/etc/engine/http-tokens.json"]
