package cluster

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon/model"
)

// PutResources replaces the resources of stack, compressed, if this
// replica holds it.
func (c *Cluster) PutResources(stack string, r model.Resources) error {
	return c.putStackJSON("resources/", "resources", stack, r)
}

// Resources reads the resources of stack; the error wraps
// model.ErrNotFound when there are none.
func (c *Cluster) Resources(stack string) (model.Resources, error) {
	var r model.Resources
	return r, c.getStackJSON("resources/", "resources", stack, &r)
}

// PutPreview replaces the last preview of stack, compressed, if this
// replica holds it.
func (c *Cluster) PutPreview(stack string, p model.StackPreview) error {
	return c.putStackJSON("previews/", "preview", stack, p)
}

// Preview reads the last preview of stack; the error wraps
// model.ErrNotFound when there is none.
func (c *Cluster) Preview(stack string) (model.StackPreview, error) {
	var p model.StackPreview
	return p, c.getStackJSON("previews/", "preview", stack, &p)
}

// putStackJSON writes v, as gzipped JSON, at the key of stack under part,
// fenced by stack's ownership; what names it in errors.
func (c *Cluster) putStackJSON(part, what, stack string, v any) error {
	if stack == "" {
		return fmt.Errorf("cluster: put %s: empty stack name", what)
	}
	data, err := json.Marshal(v)
	if err == nil {
		data, err = compress(data)
	}
	if err == nil {
		_, err = c.fencedTxn(stack, nil, clientv3.OpPut(c.key(part, stack), string(data)))
	}
	if err != nil {
		return fmt.Errorf("cluster: put %s of %s: %w", what, stack, err)
	}
	return nil
}

// getStackJSON reads the gzipped JSON at the key of stack under part
// into v; the error wraps model.ErrNotFound when it is not set.
func (c *Cluster) getStackJSON(part, what, stack string, v any) error {
	data, err := c.get(c.key(part, stack))
	if err == nil {
		err = decodeGzipJSON(data, v)
	}
	if err != nil {
		return fmt.Errorf("cluster: %s of %s: %w", what, stack, err)
	}
	return nil
}

// decodeGzipJSON decodes the gzipped JSON value v into x.
func decodeGzipJSON(v []byte, x any) error {
	zr, err := gzip.NewReader(bytes.NewReader(v))
	if err != nil {
		return err
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, x)
}
