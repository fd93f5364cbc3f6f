#!/usr/bin/env bash
# image.sh stages and builds stackd's container image, described by the
# Containerfile at the repository root. The image is FROM scratch: every
# binary is built here, statically (CGO_ENABLED=0), so that building the
# image needs no base image and no registry.
#
#   tools/image.sh context DIR VERSION
#       Builds stackd (stamped VERSION) and the pinned pulumi CLI and YAML
#       language host (the versions of tools/pulumi and
#       tools/pulumi-language-yaml) into DIR/static, then stages the build
#       context DIR/context, afresh each time:
#         rootfs/        copied to / as root: the three binaries in
#                        /usr/local/bin, the CA certificates, /etc/passwd and
#                        /etc/group with the user stackd (65532), an empty
#                        /etc/stackd, /var/lib and /tmp (mode 1777)
#         state/stackd/  copied to /var/lib/stackd, owned by stackd
#   tools/image.sh build DIR VERSION IMAGE
#       Stages DIR as above, then builds the Containerfile on DIR/context
#       with $CONTAINER_ENGINE (podman unless set; docker takes the same
#       arguments), tagged IMAGE:VERSION and IMAGE:latest. With BASE_IMAGE
#       set, it builds Containerfile.base on that image instead: the base
#       brings pulumi and the language runtimes, and only stackd is copied
#       from the context.
#
# GOARCH selects the binaries' architecture (default: the Go toolchain's).
# CA_CERTS names the CA bundle to copy when it is not at one of the usual
# places.
set -euo pipefail

usage() {
	echo "usage: image.sh context DIR VERSION | image.sh build DIR VERSION IMAGE" >&2
	exit 2
}
[ $# -ge 3 ] || usage
cmd=$1 dir=$2 version=$3
case $cmd in
context) [ $# -eq 3 ] || usage ;;
build) [ $# -eq 4 ] || usage ;;
*) usage ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

UID_GID=65532
export CGO_ENABLED=0 GOOS=linux

# Check the engine before the long builds.
engine=${CONTAINER_ENGINE:-podman}
if [ "$cmd" = build ] && ! command -v "$engine" >/dev/null; then
	echo "image: $engine not found: install it (Debian: apt-get install podman runc)," \
		"or set CONTAINER_ENGINE=docker" >&2
	exit 1
fi

# modversion WRAPPER_DIR MODULE: the version of MODULE the wrapper pins.
modversion() {
	(cd "$root/tools/$1" && go list -m -f '{{.Version}}' "$2")
}

# build NAME DIR PACKAGE LDFLAGS: go build in DIR into static/NAME. The go
# command relinks only when the binary is out of date.
build() {
	echo "image: building static $1" >&2
	(cd "$2" && go build -trimpath -ldflags "-s -w $4" -o "$dir/static/$1" "$3")
}

pulumi_version=$(modversion pulumi github.com/pulumi/pulumi/pkg/v3)
yaml_version=$(modversion pulumi-language-yaml github.com/pulumi/pulumi-yaml)
build stackd "$root" ./cmd/stackd "-X main.version=$version"
build pulumi "$root/tools/pulumi" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
	"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$pulumi_version"
build pulumi-language-yaml "$root/tools/pulumi-language-yaml" github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
	"-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$yaml_version"
for b in stackd pulumi pulumi-language-yaml; do
	if ! go version -m "$dir/static/$b" | grep -Eq '^[[:space:]]+build[[:space:]]+CGO_ENABLED=0$'; then
		echo "image: $dir/static/$b is not a static build" >&2
		exit 1
	fi
done
if [ "$(go env GOARCH)" = "$(go env GOHOSTARCH)" ]; then
	got=$("$dir/static/pulumi" version)
	if [ "$got" != "$pulumi_version" ]; then
		echo "image: pulumi version printed '$got', want $pulumi_version" >&2
		exit 1
	fi
fi

certs=${CA_CERTS:-}
if [ -z "$certs" ]; then
	for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
		if [ -s "$f" ]; then
			certs=$f
			break
		fi
	done
fi
if [ -z "$certs" ] || [ ! -s "$certs" ]; then
	echo "image: no CA certificate bundle found (Debian: apt-get install ca-certificates); set CA_CERTS" >&2
	exit 1
fi

# The context is made afresh so that nothing else gets into the image.
ctx=$dir/context
rm -rf "$ctx"
umask 022
mkdir -p "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs" "$ctx/rootfs/etc/stackd" \
	"$ctx/rootfs/var/lib" "$ctx/rootfs/tmp" "$ctx/state/stackd"
chmod 1777 "$ctx/rootfs/tmp"
chmod 0700 "$ctx/state/stackd"
for b in stackd pulumi pulumi-language-yaml; do
	install -m 0755 "$dir/static/$b" "$ctx/rootfs/usr/local/bin/$b"
done
install -m 0644 "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\nstackd:x:%s:%s:stackd:/var/lib/stackd:/sbin/nologin\n' \
	"$UID_GID" "$UID_GID" >"$ctx/rootfs/etc/passwd"
printf 'root:x:0:\nstackd:x:%s:\n' "$UID_GID" >"$ctx/rootfs/etc/group"
chmod 0644 "$ctx/rootfs/etc/passwd" "$ctx/rootfs/etc/group"
echo "image: context staged in $ctx (stackd $version, pulumi $pulumi_version, pulumi-language-yaml $yaml_version)" >&2

if [ "$cmd" = build ]; then
	image=$4
	if [ -n "${BASE_IMAGE:-}" ]; then
		"$engine" build -f "$root/Containerfile.base" --build-arg "BASE_IMAGE=$BASE_IMAGE" \
			-t "$image:$version" -t "$image:latest" "$ctx"
		echo "image: built $image:$version and $image:latest on $BASE_IMAGE" >&2
	else
		"$engine" build -f "$root/Containerfile" -t "$image:$version" -t "$image:latest" "$ctx"
		echo "image: built $image:$version and $image:latest" >&2
	fi
fi
