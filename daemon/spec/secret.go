package spec

import "strings"

// IsSecret says whether the value of an envRefs entry (of variable
// envName) is scrubbed from logs and outputs: the values of Secret, FS
// and Literal references always (a Literal may be a credential written
// in the config); environment variables and other stacks' outputs when a
// name says they are secret (a secret output of another stack is
// scrubbed in any case). Scrubbing every value would mangle logs
// wherever a region or profile name appears.
func (r ResourceRef) IsSecret(envName string) bool {
	switch r.Type {
	case RefSecret, RefFS, RefLiteral:
		return true
	case RefEnv:
		return SecretName(envName) || SecretName(r.Env.Name)
	case RefStackOutput:
		return SecretName(envName) || SecretName(r.StackOutput.Output)
	}
	return false
}

// secretWords mark a variable or output name as holding a secret.
// SecretName is the rule; the runner applies it to the daemon-wide
// environment too.
var secretWords = []string{"SECRET", "TOKEN", "PASSWORD", "PASSWD", "PASSPHRASE", "KEY", "CREDENTIAL", "AUTH", "PRIVATE", "CERT"}

// SecretName says whether a variable or output name says it holds a
// secret (TOKEN, SECRET, PASSWORD, KEY, …).
func SecretName(name string) bool {
	upper := strings.ToUpper(name)
	for _, w := range secretWords {
		if strings.Contains(upper, w) {
			return true
		}
	}
	return false
}
