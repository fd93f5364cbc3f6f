module github.com/stackd/stackd

go 1.25.0

require (
	go.etcd.io/bbolt v1.5.0
	gopkg.in/yaml.v3 v3.0.1
)

require golang.org/x/sys v0.45.0 // indirect
