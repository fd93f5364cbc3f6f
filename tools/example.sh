#!/bin/sh
# example-repo.sh DIR: make DIR a Git repository holding stackd's example
# project (testdata/example) on branch main, unless it already is one.
set -eu
dir=$1
if [ -d "$dir/.git" ]; then
	exit 0
fi
mkdir -p "$dir"
cp testdata/example/* "$dir"/
cd "$dir"
git init -q -b main .
git add -A
git -c user.name=stackd -c user.email=stackd@localhost commit -q -m "Example project"
echo "example repository: $dir (edit, commit, and stackd applies it)"
