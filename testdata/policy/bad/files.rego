package stackd.files

# The old syntax, without `contains` and `if`, is not Rego v1.
deny[msg] {
	some step in input.steps
	msg := step.urn
}
