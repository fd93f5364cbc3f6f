// Package policy judges previews with Rego policies, evaluated by the OPA
// Go library: it is the only importer of github.com/open-policy-agent/opa.
//
// A policy set is the *.rego files of a directory (Rego v1 syntax). Each
// file's package is a policy's name; a policy's rules `deny` and `warn`
// are sets or arrays of strings, its messages. The input document is a
// model.PolicyInput. A Set is compiled once and evaluated concurrently;
// Live keeps the set in force and reloads it when its files change.
package policy
