# pinfs container image: `make image` (IMAGE ?= pinfs:dev) builds it with
# docker, podman or buildah. Two stages: a static binary built with the Go
# toolchain, then a small Debian runtime with fuse3 (fusermount3) and CA
# certificates. integration/deploy builds the binary with the `go build`
# line below, as written here, and checks that it is static.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# CGO_ENABLED=0: no libc, so the binary runs on any base image. -trimpath
# keeps the build machine's paths out of it; -s -w drops the symbol table
# and DWARF (stack traces keep function names and lines). -X stamps the
# commit the image is built from (make image passes it as PINFS_REVISION),
# which pinfs version, pinfs status and the run record's run_start report:
# .git is not in the build context, so go build cannot stamp it itself.
ARG PINFS_REVISION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X github.com/pinfs/pinfs/cmd/internal/buildinfo.revision=${PINFS_REVISION}" -o /out/pinfs ./cmd/pinfs

FROM debian:12-slim
# fuse3: fusermount3 (setuid root), which a non-root pinfs mounts through.
# user_allow_other in /etc/fuse.conf lets a non-root mount use
# --allow-other, so that another container's user can read it.
RUN apt-get update \
 && apt-get install -y --no-install-recommends fuse3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && sed -i 's/^#\s*user_allow_other/user_allow_other/' /etc/fuse.conf \
 && groupadd --gid 65532 pinfs \
 && useradd --uid 65532 --gid 65532 --home-dir /home/pinfs --create-home --shell /usr/sbin/nologin pinfs
COPY --from=build /out/pinfs /usr/local/bin/pinfs
# Non-root by default: pinfs warm, verify, pin and a mount with /dev/fuse
# passed in (through fusermount3) need no root. The Kubernetes sidecar
# (deploy/kubernetes/sidecar.yaml) overrides this with runAsUser: 0 and
# privileged: true, because Bidirectional mount propagation, which makes
# its mount visible in the trainer container, is allowed only to
# privileged containers.
USER 65532:65532
ENTRYPOINT ["pinfs"]
CMD ["--help"]
