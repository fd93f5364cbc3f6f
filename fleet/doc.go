// Package fleet evaluates the generators of StackSets: it turns a set's
// list, git, matrix and merge generators into the parameter sets that
// the spec renders into stacks, and keeps what the generators last
// yielded so that a failing one changes nothing.
//
// It is a package of its own, not part of daemon/spec or gitwatch,
// because it joins the two: the spec stays pure (it parses and renders,
// and calls an Expander), gitwatch stays the only go-git user (fleet
// reaches Git through the Git interface, which gitwatch's Fetcher
// satisfies), and fleet holds the state in between: checkouts of the
// generators' repositories, the last good output of every set, and what
// the API shows of each generator.
//
// Where things are:
//
//	expander.go  Options, New, Expand and the last good output per set
//	eval.go      the generators: list, matrix, merge, and merging params
//	git.go       git generators: sources, Resolve and Checkout, Changed, Watch
//	walk.go      the checkout walk (no symbolic link followed), globs, names
//	files.go     reading a files generator's JSON and YAML files
//	status.go    what each generator yielded, for the API
package fleet
