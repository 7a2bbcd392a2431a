# troupe in a container: a build stage with Go and gcc (the CPU kernels are
# C, compiled by cgo), then a slim runtime image with the binary only, run
# as an unprivileged user.
#
#   docker build -t troupe .
#   docker run -p 8080:8080 troupe                       # the built-in demo model
#   docker run -p 8080:8080 -v ~/.cache/huggingface:/home/troupe/.cache/huggingface \
#     troupe serve Qwen/Qwen3-0.6B                        # a model from the Hub (or a mounted folder)

FROM golang:1.26-bookworm AS build
WORKDIR /src
# go.work joins tests/, which the binary does not need.
ENV GOWORK=off CGO_ENABLED=1
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -buildvcs=false -o /out/troupe ./cmd/troupe

FROM debian:bookworm-slim
# CA certificates for downloads from the Hugging Face Hub over HTTPS.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --create-home --home-dir /home/troupe troupe
COPY --from=build /out/troupe /usr/local/bin/troupe
USER troupe
WORKDIR /home/troupe
# Listen on every interface inside the container; every serve flag can be
# set this way (TROUPE_<FLAG>).
ENV TROUPE_HOST=0.0.0.0 TROUPE_PORT=8080
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 CMD ["troupe", "health"]
ENTRYPOINT ["troupe"]
CMD ["serve"]
