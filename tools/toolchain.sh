#!/usr/bin/env bash
# toolchain.sh DIR builds the pinned Pulumi toolchain into DIR from the Go
# module proxy. Each binary is rebuilt only when the one in DIR does not
# embed the pinned module version, so a second run does nothing. The test
# provider pulumi-resource-stackdtest is a local module (testdata/provider),
# so it carries no version: it is rebuilt when a stamp of its sources in DIR
# differs.
set -euo pipefail

bin=${1:?usage: toolchain.sh BIN_DIR}
mkdir -p "$bin"
bin=$(cd "$bin" && pwd)
tools=$(cd "$(dirname "$0")" && pwd)

# Static builds: they run in the FROM-scratch image as well, and `make
# image` then finds every package compiled already.
export CGO_ENABLED=0

PULUMI_VERSION=v3.250.0
PULUMI_YAML_VERSION=v1.25.0
PROVIDER=pulumi-resource-stackdtest

# has BINARY MODULE VERSION: true when BINARY was built with MODULE@VERSION.
has() {
	[ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -Eq "[[:space:]]$2[[:space:]]+$3([[:space:]]|$)"
}

say() { echo "toolchain: $*" >&2; }

# build NAME WRAPPER_DIR PACKAGE [LDFLAGS]: the modules first (a download
# of hundreds the first time, silent but for its errors), then the
# compilation, which says every 30 s that it goes on rather than listing
# packages.
build() {
	local start=$SECONDS ticker
	say "$1: downloading its modules (from the Go module proxy unless cached)"
	(cd "$tools/$2" && go mod download)
	say "$1: compiling"
	(while sleep 30; do say "$1: still compiling, $((SECONDS - start)) s"; done) &
	ticker=$!
	if ! (cd "$tools/$2" && go build -trimpath -ldflags "${4:-}" -o "$bin/$1.tmp" "$3"); then
		kill "$ticker" 2>/dev/null
		say "$1: build failed"
		return 1
	fi
	kill "$ticker" 2>/dev/null
	mv "$bin/$1.tmp" "$bin/$1"
	say "$1: built in $((SECONDS - start)) s"
}

# stamp MODULE_DIR: a sha256 over the module's go.mod, go.sum and *.go files
# (names and contents, in sorted order).
stamp() {
	(cd "$1" && find . -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) -print0 |
		LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

if has "$bin/pulumi" github.com/pulumi/pulumi/pkg/v3 "$PULUMI_VERSION"; then
	say "pulumi $PULUMI_VERSION: built already, skipped"
else
	# Without the version stamp `pulumi version` prints nothing and the
	# Automation API refuses the CLI.
	build pulumi pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
		"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$PULUMI_VERSION"
fi
if has "$bin/pulumi-language-yaml" github.com/pulumi/pulumi-yaml "$PULUMI_YAML_VERSION"; then
	say "pulumi-language-yaml $PULUMI_YAML_VERSION: built already, skipped"
else
	build pulumi-language-yaml pulumi-language-yaml github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml \
		"-X github.com/pulumi/pulumi-yaml/pkg/version.Version=$PULUMI_YAML_VERSION"
fi

sum=$(stamp "$tools/../testdata/provider")
if [ -x "$bin/$PROVIDER" ] && [ "$(cat "$bin/.$PROVIDER.sum" 2>/dev/null)" = "$sum" ]; then
	say "$PROVIDER: its sources are unchanged, skipped"
else
	build "$PROVIDER" ../testdata/provider .
	echo "$sum" >"$bin/.$PROVIDER.sum"
fi

got=$("$bin/pulumi" version)
if [ "$got" != "$PULUMI_VERSION" ]; then
	say "$bin/pulumi version printed '$got', want $PULUMI_VERSION"
	exit 1
fi
say "done: pulumi $got, pulumi-language-yaml $PULUMI_YAML_VERSION, $PROVIDER in $bin"
