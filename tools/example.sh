#!/bin/sh
# example.sh REPO_DIR PULUMI_HOME: prepare stackd's bundled example.
#
# REPO_DIR becomes a Git repository holding the example project
# (testdata/example) on branch main, unless it already is one. The
# project's test provider (pulumi-resource-stackdtest, on PATH) is
# installed into PULUMI_HOME's plugin cache, where pulumi finds a team's
# providers too: run with PULUMI_IGNORE_AMBIENT_PLUGINS, pulumi then looks
# for plugins there rather than on PATH, and prints no "using ... from
# $PATH" notice on every use.
set -eu
dir=$1 home=$2
if [ ! -d "$dir/.git" ]; then
	mkdir -p "$dir"
	cp testdata/example/* "$dir"/
	(
		cd "$dir"
		git init -q -b main .
		git add -A
		git -c user.name=stackd -c user.email=stackd@localhost commit -q -m "Example project"
	)
	echo "example repository: $dir (edit, commit, and stackd applies it)"
fi
version=$(sed -n 's/^[[:space:]]*Version = "\(.*\)"$/\1/p' testdata/provider/main.go)
if [ ! -x "$home/plugins/resource-stackdtest-v$version/pulumi-resource-stackdtest" ]; then
	PULUMI_HOME=$home pulumi plugin install resource stackdtest "$version" \
		--file "$(command -v pulumi-resource-stackdtest)" >/dev/null
fi
