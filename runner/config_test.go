package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/model"
)

func TestFinalValues(t *testing.T) {
	values, err := finalValues("proj", []model.ConfigValue{
		{Key: "a", Value: "1"},
		{Key: "aws:region", Value: "eu-west-1"},
		{Key: "proj:a", Value: "2", Secret: true}, // the same key: replaces "a"
		{Key: "s", Value: `"quoted"`, JSON: true, Secret: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range values {
		got = append(got, v.key+"="+v.Value)
	}
	if want := "aws:region=eu-west-1 proj:a=2 proj:s=quoted"; strings.Join(got, " ") != want {
		t.Fatalf("values %v, want %s", got, want)
	}
	for _, bad := range []model.ConfigValue{
		{Key: "x", Value: `{"a":1}`, JSON: true, Secret: true},
		{Key: "x", Value: `{`, JSON: true},
		{Key: "-x", Value: "1"},
		{Key: "", Value: "1"},
	} {
		if _, err := finalValues("proj", []model.ConfigValue{bad}); err == nil {
			t.Errorf("finalValues accepted %+v", bad)
		}
	}
}

func TestBuildStackFile(t *testing.T) {
	repo := []byte(`encryptionsalt: theirs
config:
  proj:kept: from the repo
  proj:plain: replaced
  proj:secret:
    secure: v1:theirs
environment:
  - team/env
`)
	header := []*yaml.Node{strNode("encryptionsalt"), strNode("ours")}
	values, err := finalValues("proj", []model.ConfigValue{
		{Key: "plain", Value: "true"},
		{Key: "obj", Value: `{"b":[1,2.5,"x",false,null],"a":"yes"}`, JSON: true},
		{Key: "secret", Value: "s3cr3t-value", Secret: true},
		{Key: "again", Value: "s3cr3t-value", Secret: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	reuse := map[string]*yaml.Node{"proj:again": {Kind: yaml.MappingNode, Content: []*yaml.Node{strNode("secure"), strNode("v1:kept")}}}
	data, err := buildStackFile(header, repo, "proj", values, reuse)
	if err != nil {
		t.Fatal(err)
	}
	want := `encryptionsalt: ours
config:
  proj:kept: from the repo
  proj:plain: "true"
  proj:obj:
    a: yes
    b:
      - 1
      - 2.5
      - x
      - false
      - null
  proj:again:
    secure: v1:kept
environment:
  - team/env
`
	if string(data) != want {
		t.Fatalf("stack file:\n%s\nwant:\n%s", data, want)
	}
	if strings.Contains(string(data), "s3cr3t") {
		t.Fatal("a secret value was written in clear")
	}
}

func TestSetHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Pulumi.dev.yaml")
	if err := os.WriteFile(path, []byte("encryptionsalt: old\nconfig:\n  p:k: v\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := setHeader(path, []*yaml.Node{strNode("secretsprovider"), strNode("awskms://x"), strNode("encryptedkey"), strNode("abc")}); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if want := "secretsprovider: awskms://x\nencryptedkey: abc\nconfig:\n  p:k: v\n"; string(data) != want {
		t.Fatalf("file:\n%s\nwant:\n%s", data, want)
	}
	if got := fileHeader(path); len(got) != 4 || got[3].Value != "abc" {
		t.Fatalf("fileHeader = %v", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	missing := filepath.Join(t.TempDir(), "new.yaml")
	if err := setHeader(missing, nil); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(missing); len(data) != 0 {
		t.Fatalf("a header-less new file holds %q", data)
	}
}

func TestEnsureSecretFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "passphrase")
	first, err := ensureSecretFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 44 {
		t.Fatalf("secret %q is not 32 bytes in base64", first)
	}
	again, err := ensureSecretFile(path)
	if err != nil || string(again) != string(first) {
		t.Fatalf("second call: %q, %v; want the same secret", again, err)
	}
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", fi.Mode(), di.Mode())
	}
}
