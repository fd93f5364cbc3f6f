// Package spec is stackd's Stack API: PKO's Stack and Program specs as Go
// types, and the config that holds them. It parses YAML strictly (every
// problem names file:line:column and the field), validates a whole config
// at once, resolves references (Secret, ConfigMap, Env, FS) to values, and
// hashes specs into the generation the reconcile loop compares.
//
// It is pure: it reads the files it is given and nothing else, starts
// nothing, and imports no other package of stackd's, so the web server,
// the command line and the loop all use it without pulling each other in.
//
// Where things are:
//
//	spec.go      the types: StackSpec, ResourceRef, ProgramSpec, DriftDetection, …
//	decode.go    the strict decoder over yaml.Node, driven by struct tags
//	load.go      files, directories and documents (PKO manifests, compact lists)
//	validate.go  checks across the whole config: names, sources, refs, cycles
//	diag.go      diagnostics and ConfigError
//	source.go    config sources: local paths and git+URL//dir?ref= values
//	resolve.go   reading references to values
//	hash.go      spec hashes (generations) and config fingerprints
//	plain.go     specs as plain maps: for hashing and the redacted view
//	cron.go      the 5-field cron schedules of drift detection
package spec
