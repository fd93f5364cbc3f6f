package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/model"
)

// headerKeys are the secrets provider settings of a stack config file,
// which `stack init` writes and the runner keeps.
var headerKeys = []string{"secretsprovider", "encryptedkey", "encryptionsalt"}

// applyConfig brings the runner's config file of w up to date: the
// repository's Pulumi.<stack>.yaml config overlaid with w.Config, and
// w.Environments. Nothing runs when the config's digest equals the
// marker's, or with KeepConfig. Plain values are written into the file;
// each secret is set with one `config set --secret` that reads it from
// stdin, unless the marker shows it unchanged: it keeps its ciphertext.
func (r *Runner) applyConfig(ctx context.Context, w *workspace) error {
	if w.KeepConfig {
		return nil
	}
	m := w.readMarker()
	repo, err := readProjectFile(w.WorkDir, w.ProjectDir, w.stackFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("stack %s: read %s: %w", w.Name, w.stackFile, err)
	}
	digest := r.configDigest(w, repo)
	if m.Config == digest {
		return nil
	}
	values, err := finalValues(w.project, w.Config)
	if err != nil {
		return fmt.Errorf("stack %s: %w", w.Name, err)
	}
	reuse := r.reusableSecrets(w, m, values)
	// The file is stale until every step below succeeded.
	if err := w.writeMarker(marker{Backend: m.Backend, Stack: m.Stack, Project: m.Project, Identity: m.Identity}); err != nil {
		return err
	}
	data, err := buildStackFile(fileHeader(w.configFile), repo, w.project, values, reuse)
	if err != nil {
		return fmt.Errorf("stack %s: %s: %w", w.Name, w.stackFile, err)
	}
	if err := writeFileAtomic(w.configFile, data, 0o600); err != nil {
		return fmt.Errorf("stack %s: write config file: %w", w.Name, err)
	}
	if err := r.setSecrets(ctx, w, values, reuse); err != nil {
		return err
	}
	if err := r.addEnvironments(ctx, w); err != nil {
		return err
	}
	m.Config, m.Secrets = digest, r.secretDigests(values)
	return w.writeMarker(m)
}

// secretDigests digests each secret value under its key.
func (r *Runner) secretDigests(values []configValue) map[string]string {
	out := map[string]string{}
	for _, v := range values {
		if v.Secret {
			out[v.key] = r.digest("secret", []byte(v.key), []byte(v.Value))
		}
	}
	return out
}

// reusableSecrets are the ciphertexts in the current config file of the
// secret values that the marker says are unchanged: they need no `config
// set`.
func (r *Runner) reusableSecrets(w *workspace, m marker, values []configValue) map[string]*yaml.Node {
	data, err := readRegular(w.configFile)
	if err != nil {
		return nil
	}
	doc, err := parseMapping(data)
	if err != nil {
		return nil
	}
	cfg := mappingValue(doc, "config")
	if cfg == nil {
		return nil
	}
	reuse := map[string]*yaml.Node{}
	for key, d := range r.secretDigests(values) {
		if old := mappingValue(cfg, key); old != nil && m.Secrets[key] == d && mappingValue(old, "secure") != nil {
			reuse[key] = old
		}
	}
	return reuse
}

// configDigest digests everything the config file is built from.
func (r *Runner) configDigest(w *workspace, repo []byte) string {
	parts := [][]byte{[]byte(w.project), repo}
	for _, v := range w.Config {
		flags := fmt.Sprintf("json=%t,secret=%t", v.JSON, v.Secret)
		parts = append(parts, []byte(v.Key), []byte(v.Value), []byte(flags))
	}
	parts = append(parts, []byte("environments"))
	for _, e := range w.Environments {
		parts = append(parts, []byte(e))
	}
	return r.digest("config/v1", parts...)
}

// configValue is a config value under its full key ("project:name").
type configValue struct {
	key string
	model.ConfigValue
}

// finalValues resolves values in order, a later value of a key replacing
// an earlier one, and checks them.
func finalValues(project string, values []model.ConfigValue) ([]configValue, error) {
	var out []configValue
	for _, v := range values {
		key := fullKey(project, v.Key)
		if key == "" || strings.HasPrefix(v.Key, "-") || strings.ContainsRune(key, 0) {
			return nil, fmt.Errorf("invalid config key %q", v.Key)
		}
		if v.JSON && !json.Valid([]byte(v.Value)) {
			return nil, fmt.Errorf("config %s: the value is not valid JSON", key)
		}
		if v.JSON && v.Secret {
			var s string
			if err := json.Unmarshal([]byte(v.Value), &s); err != nil {
				return nil, fmt.Errorf("config %s: a secret value must be a string, not structured JSON", key)
			}
			v.Value, v.JSON = s, false
		}
		out = slices.DeleteFunc(out, func(c configValue) bool { return c.key == key })
		out = append(out, configValue{key: key, ConfigValue: v})
	}
	return out, nil
}

// fullKey is key in the project's namespace unless it names one.
func fullKey(project, key string) string {
	if key == "" || strings.Contains(key, ":") {
		return key
	}
	return project + ":" + key
}

// setSecrets sets each secret value with the CLI, the value on stdin,
// unless its ciphertext is reused.
func (r *Runner) setSecrets(ctx context.Context, w *workspace, values []configValue, reuse map[string]*yaml.Node) error {
	for _, v := range values {
		if !v.Secret || reuse[v.key] != nil {
			continue
		}
		_, err := r.pulumi(ctx, w, call{what: "set secret config " + v.key, stdin: strings.NewReader(v.Value)},
			"config", "set", "--secret", "--raw", "--stack", w.Stack, "--config-file", w.configFile, "--", v.key)
		if err != nil {
			return fmt.Errorf("stack %s: %w", w.Name, err)
		}
	}
	return nil
}

// addEnvironments imports w's ESC environments into the config file.
func (r *Runner) addEnvironments(ctx context.Context, w *workspace) error {
	if len(w.Environments) == 0 {
		return nil
	}
	args := append([]string{"config", "env", "add"}, w.Environments...)
	args = append(args, "--yes", "--stack", w.Stack, "--config-file", w.configFile)
	if _, err := r.pulumi(ctx, w, call{what: "add environments"}, args...); err != nil {
		return fmt.Errorf("stack %s: %w", w.Name, err)
	}
	return nil
}

// buildStackFile is a stack config file: header, then the repository
// file's config overlaid with the plain values, and the repository file's
// environment. Secret values are left to the CLI, unless reuse holds
// their ciphertext; a repository value of their key is dropped.
func buildStackFile(header []*yaml.Node, repo []byte, project string, values []configValue, reuse map[string]*yaml.Node) ([]byte, error) {
	repoDoc, err := parseMapping(repo)
	if err != nil {
		return nil, err
	}
	cfg := mappingValue(repoDoc, "config")
	if cfg == nil {
		cfg = &yaml.Node{Kind: yaml.MappingNode}
	}
	for _, v := range values {
		removeKey(cfg, func(k string) bool { return fullKey(project, k) == v.key })
		if v.Secret {
			if old := reuse[v.key]; old != nil {
				cfg.Content = append(cfg.Content, strNode(v.key), old)
			}
			continue
		}
		node, err := valueNode(v.ConfigValue)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", v.key, err)
		}
		cfg.Content = append(cfg.Content, strNode(v.key), node)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: slices.Clone(header)}
	if len(cfg.Content) > 0 {
		doc.Content = append(doc.Content, strNode("config"), cfg)
	}
	if env := mappingValue(repoDoc, "environment"); env != nil {
		doc.Content = append(doc.Content, strNode("environment"), env)
	}
	return encodeYAML(doc)
}

// valueNode is the YAML of a plain config value: a string, or the
// structure of its JSON.
func valueNode(v model.ConfigValue) (*yaml.Node, error) {
	if !v.JSON {
		return strNode(v.Value), nil
	}
	dec := json.NewDecoder(strings.NewReader(v.Value))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err != nil {
		return nil, err
	}
	return jsonNode(x), nil
}

// jsonNode converts a JSON value decoded with UseNumber into YAML, map
// keys sorted.
func jsonNode(x any) *yaml.Node {
	switch x := x.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			n.Content = append(n.Content, strNode(k), jsonNode(x[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode}
		for _, e := range x {
			n.Content = append(n.Content, jsonNode(e))
		}
		return n
	case string:
		return strNode(x)
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(string(x), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(x)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(x)}
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// parseMapping parses a YAML document that must be a mapping; empty
// input is an empty mapping.
func parseMapping(data []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.MappingNode}, nil
	}
	if root := doc.Content[0]; root.Kind == yaml.MappingNode {
		return root, nil
	}
	return nil, errors.New("the document is not a mapping")
}

// mappingValue is the value of key in mapping m, nil when absent.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// removeKey drops the entries of mapping m whose key matches.
func removeKey(m *yaml.Node, match func(string) bool) {
	var kept []*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		if !match(m.Content[i].Value) {
			kept = append(kept, m.Content[i], m.Content[i+1])
		}
	}
	m.Content = kept
}

func encodeYAML(doc *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fileHeader is the secrets provider header of the stack config file at
// path as key and value nodes; nil when it has none or cannot be read.
func fileHeader(path string) []*yaml.Node {
	data, err := readRegular(path)
	if err != nil {
		return nil
	}
	return header(data)
}

// projectHeader is fileHeader of the repository's stack config file.
func projectHeader(w *workspace) []*yaml.Node {
	data, err := readProjectFile(w.WorkDir, w.ProjectDir, w.stackFile)
	if err != nil {
		return nil
	}
	return header(data)
}

// header is the secrets provider header of a stack config file's data.
func header(data []byte) []*yaml.Node {
	doc, err := parseMapping(data)
	if err != nil {
		return nil
	}
	var header []*yaml.Node
	for _, k := range headerKeys {
		if v := mappingValue(doc, k); v != nil {
			header = append(header, strNode(k), v)
		}
	}
	return header
}

// setHeader makes header the secrets provider header of the config file
// at path, keeping the rest; a missing file is created.
func setHeader(path string, header []*yaml.Node) error {
	data, err := readRegular(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, errForeign) {
		return err
	}
	doc, err := parseMapping(data)
	if err != nil {
		doc = &yaml.Node{Kind: yaml.MappingNode} // a damaged file is rebuilt
	}
	removeKey(doc, func(k string) bool { return slices.Contains(headerKeys, k) })
	doc.Content = append(slices.Clone(header), doc.Content...)
	out := []byte{}
	if len(doc.Content) > 0 {
		if out, err = encodeYAML(doc); err != nil {
			return err
		}
	}
	return writeFileAtomic(path, out, 0o600)
}

// decodeJSON decodes one JSON value from rd, numbers as json.Number.
func decodeJSON(rd io.Reader, v any) error {
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	return dec.Decode(v)
}
