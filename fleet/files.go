package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/spec"
)

// files yields a parameter set per regular file of the checkout dir that
// globs select, sorted by path: the fields of its top-level mapping
// (JSON for a .json file, YAML otherwise), nested ones kept nested, and
// path, the parameters of its directory with filename and
// filenameNormalized. At most maxFiles files, of at most maxBytes each.
func files(dir string, globs []glob, maxFiles int, maxBytes int64) ([]item, error) {
	var paths []string
	err := walk(dir, globs, func(p string, d fs.DirEntry) error {
		if !d.Type().IsRegular() || !selected(globs, p) {
			return nil // links, directories, devices: never read
		}
		if len(paths) == maxFiles {
			return fmt.Errorf("git: more than %d files match: %w", maxFiles, errTooMany)
		}
		paths = append(paths, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("git: open checkout: %w", err)
	}
	defer root.Close()
	out := make([]item, len(paths))
	for i, p := range paths {
		params, err := fileParams(root, p, maxBytes)
		if err != nil {
			return nil, fmt.Errorf("git: %w", err)
		}
		out[i] = item{params: params, origin: p}
	}
	return out, nil
}

// fileParams reads the file p of root into its parameters.
func fileParams(root *os.Root, p string, maxBytes int64) (map[string]any, error) {
	data, err := readBounded(root, p, maxBytes)
	if err != nil {
		return nil, err
	}
	var params map[string]any
	if strings.EqualFold(path.Ext(p), ".json") {
		params, err = parseJSON(p, data)
	} else {
		params, err = parseYAML(p, data)
	}
	if err != nil {
		return nil, err
	}
	if _, ok := params["path"]; ok {
		return nil, fmt.Errorf("%s: a top-level field path would hide the generator's path parameter", p)
	}
	pp := pathParams(path.Dir(p))
	pp["filename"] = path.Base(p)
	pp["filenameNormalized"] = normalize(path.Base(p))
	params["path"] = pp
	return params, nil
}

// readBounded reads the regular file p of root, refusing one larger than
// maxBytes. The walk saw p as a regular file; opening it through root
// keeps a path that changed since inside the checkout.
func readBounded(root *os.Root, p string, maxBytes int64) ([]byte, error) {
	f, err := root.Open(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if int64(len(data)) > maxBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", p, maxBytes)
	}
	return data, nil
}

// parseJSON reads a JSON object; an error names name:line:col.
func parseJSON(name string, data []byte) (map[string]any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("%s: %w", offsetPos(name, data, se.Offset), err)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, ok := numbers(v).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not a JSON object", name)
	}
	return m, nil
}

// numbers turns the json.Numbers of v into int where they are whole,
// float64 otherwise, as YAML's decoder does.
func numbers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return int(i)
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = numbers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = numbers(x)
		}
	}
	return v
}

// offsetPos is the position of byte offset off of data, 1-based.
func offsetPos(name string, data []byte, off int64) spec.Pos {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := int(off) - (bytes.LastIndexByte(before, '\n') + 1)
	return spec.Pos{File: name, Line: line, Col: max(col, 1)}
}

// parseYAML reads a YAML mapping (an empty document is an empty one); a
// syntax error names name:line (and the column, where yaml.v3 allows).
func parseYAML(name string, data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, errors.New(spec.SyntaxError(name, data, err).String())
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		pos := spec.Pos{File: name, Line: top.Line, Col: top.Column}
		return nil, fmt.Errorf("%s: the document is not a mapping", pos)
	}
	var v any
	if err := top.Decode(&v); err != nil {
		pos := spec.Pos{File: name, Line: top.Line, Col: top.Column}
		return nil, fmt.Errorf("%s: %w", pos, err)
	}
	m, _ := stringKeys(v).(map[string]any)
	return m, nil
}

// stringKeys turns YAML mappings with non-string keys into string-keyed
// ones, so that templates address every mapping alike.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[fmt.Sprint(k)] = stringKeys(x)
		}
		return out
	case map[string]any:
		for k, x := range v {
			v[k] = stringKeys(x)
		}
	case []any:
		for i, x := range v {
			v[i] = stringKeys(x)
		}
	}
	return v
}
