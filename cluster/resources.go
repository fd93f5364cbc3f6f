package cluster

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon"
)

// PutResources replaces the resources of stack, compressed, if this
// replica holds it.
func (c *Cluster) PutResources(stack string, r daemon.Resources) error {
	if stack == "" {
		return errors.New("cluster: put resources: empty stack name")
	}
	v, err := json.Marshal(r)
	if err == nil {
		v, err = compress(v)
	}
	if err != nil {
		return fmt.Errorf("cluster: put resources of %s: %w", stack, err)
	}
	if _, err := c.fencedTxn(stack, nil, clientv3.OpPut(c.key("resources/", stack), string(v))); err != nil {
		return fmt.Errorf("cluster: put resources of %s: %w", stack, err)
	}
	return nil
}

// Resources reads the resources of stack; the error wraps
// daemon.ErrNotFound when there are none.
func (c *Cluster) Resources(stack string) (daemon.Resources, error) {
	var r daemon.Resources
	v, err := c.get(c.key("resources/", stack))
	if err == nil {
		err = decodeGzipJSON(v, &r)
	}
	if err != nil {
		return daemon.Resources{}, fmt.Errorf("cluster: resources of %s: %w", stack, err)
	}
	return r, nil
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
