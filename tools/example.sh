#!/bin/sh
# example.sh REPO_DIR: prepare stackd's bundled example.
#
# REPO_DIR becomes a Git repository holding the example project
# (testdata/example) on branch main, unless it already is one. The
# project's test provider needs no installing: stackd installs the
# providers it finds on PATH (bin/pulumi-resource-stackdtest) into its
# plugin cache when it starts.
set -eu
dir=$1
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
