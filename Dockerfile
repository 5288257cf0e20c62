# syntax=docker/dockerfile:1

# Build a static binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/oncebox ./cmd/oncebox

# Run it on a minimal image, as an unprivileged user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/oncebox /oncebox
USER nonroot:nonroot
EXPOSE 8080
ENTRYPOINT ["/oncebox"]
CMD ["serve"]
